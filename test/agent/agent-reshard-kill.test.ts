// A controller kill -9 in the middle of a live reshard (SPEC "Live resharding": a reshard in progress
// survives a restart): real agents over mTLS keep their sessions through the restart on the same port,
// the restarted controller continues the same reshard from its state file, and the switch comes.
import t from 'tap'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { bundle, makePki, request, writeTestConfig } from '../e2e/harness.js'
import { spawnController } from '../e2e/process.js'
import { Recorder, nodeIdentities, recordingAgent, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const [idA, idB] = await nodeIdentities(pki, ['node-a', 'node-b'])
const op = await bundle(pki, 'ops', 'operator')

/** A loopback port free right now (the restarted controller must come back on the same one). */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  await new Promise((resolve) => server.close(resolve))
  return port
}

t.test('kill -9 mid-reshard: the restarted controller continues it; sessions kept; the switch comes', async (t) => {
  const port = await freePort()
  const config = writeTestConfig(pki, root, { listen: { host: '127.0.0.1', port }, total_shards: 8, max_concurrency: 8, lease_seconds: 20, identify_interval_ms: 5000 })
  let ctl = await spawnController(['--config', config], root)
  t.teardown(() => void ctl.child.kill('SIGKILL'))
  const rec = new Recorder()
  const agents = [idA, idB].map((id) => recordingAgent(rec, id, [urlOf(port)], { capacity: 16 }))
  t.teardown(() => Promise.all(agents.map((a) => a.stop())))
  for (const a of agents) await a.start()
  await until('8 shards run', () => rec.running('node-a', 8).length + rec.running('node-b', 8).length === 8, 30_000)
  const covered = performance.now()
  t.equal((await request(port, pki.ca, op, '/v1/reshard', { body: { total_shards: 16 } })).status, 202)
  await until('some next-set shard runs', () => rec.running('node-a', 16).length + rec.running('node-b', 16).length > 0, 30_000)
  await new Promise((r) => setTimeout(r, 300)) // the state write is asynchronous to the answer
  ctl.child.kill('SIGKILL')
  await ctl.exited
  ctl = await spawnController(['--config', config], root)
  const resumed = (await request(port, pki.ca, op, '/v1/plan')).json
  t.match(resumed.reshard, { phase: 'identifying', total_shards: 16 }, 'the restarted controller continues the reshard')
  let switched = false
  for (let i = 0; i < 400 && !switched; i++) {
    switched = (await request(port, pki.ca, op, '/v1/plan')).json.total_shards === 16
    if (!switched) await new Promise((r) => setTimeout(r, 100))
  }
  t.ok(switched, 'switched to 16 shards')
  await until('16 of 16 run, none of 8', () => rec.running('node-a', 8).length + rec.running('node-b', 8).length === 0 && rec.running('node-a', 16).length + rec.running('node-b', 16).length === 16, 30_000)
  t.equal(rec.coverageGap(covered, 16), null, 'some session covered every guild throughout, the kill included')
  t.equal(rec.shardEvents.filter((e) => e.kind === 'start' && e.totalShards === 16).length, 16, 'no next-set session was started twice')
  t.equal(rec.shardEvents.filter((e) => e.kind === 'stop' && e.reason === 'lease_expiring').length, 0, 'no fail-safe fired')
})
