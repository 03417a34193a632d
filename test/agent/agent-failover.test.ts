// Failover between controller URLs, over real mTLS: past a URL where nothing listens and one that
// answers 503, and mid-run from a controller that stops to another one that took over its state.
import t from 'tap'
import { cpSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { makePki } from '../e2e/harness.js'
import { Recorder, controllerIn, fakeController, nodeIdentities, recordingAgent, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const settings = { total_shards: 8, max_concurrency: 8, lease_seconds: 6, identify_interval_ms: 5000 }
const root = testDir(t)
const pki = await makePki(root)
const [idA, idB] = await nodeIdentities(pki, ['node-a', 'node-b'])

/** A loopback port nobody listens on (taken and released). */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

t.test('past a dead URL and a 503 to the controller that answers', async (t) => {
  const ctl = await controllerIn(pki, join(root, 'c0'), settings)
  t.teardown(() => ctl.running.stop())
  const unavailable = await fakeController(pki, () => ({ status: 503, body: { error: 'unavailable', message: 'not serving' } }))
  t.teardown(() => unavailable.close())
  const rec = new Recorder()
  const agent = recordingAgent(rec, idA, [urlOf(await freePort()), urlOf(unavailable.port), urlOf(ctl.port)])
  t.teardown(() => agent.stop())
  await agent.start()
  await until('node-a runs its shards', () => rec.running('node-a').length === 4)
  t.equal(agent.status().controller, urlOf(ctl.port), 'the controller in use is the third URL')
  t.ok(unavailable.seen.includes('node-a POST /v1/checkin'), 'the 503 controller was asked first')
  t.equal(rec.events('node-a', 'checkin_failed').length, 0, 'failing over is not a failed check-in')
})

t.test('a controller stops; the next URL, serving the same state, takes over without a shard stopping', async (t) => {
  const c1 = await controllerIn(pki, join(root, 'c1'), settings)
  const c2Port = await freePort()
  const rec = new Recorder()
  const agent = recordingAgent(rec, idB, [urlOf(c1.port), urlOf(c2Port)])
  t.teardown(() => agent.stop())
  await agent.start()
  await until('node-b runs its shards', () => rec.running('node-b').length === 4)
  await c1.running.stop()
  // The second controller starts from the first one's state, as a replacement host would.
  cpSync(join(root, 'c1', 'state'), join(root, 'c2', 'state'), { recursive: true })
  const c2 = await controllerIn(pki, join(root, 'c2'), { ...settings, listen: { host: '127.0.0.1', port: c2Port } })
  t.teardown(() => c2.running.stop())
  const switched = performance.now()
  await until('node-b renewed through the second controller', () => agent.status().controller === urlOf(c2Port) && rec.events('node-b', 'plan_accepted').some((e) => e.at > switched))
  t.same(rec.running('node-b'), [0, 1, 2, 3], 'its shards kept running')
  t.equal(rec.shardEvents.filter((e) => e.kind === 'stop').length, 0, 'no shard was stopped')
  t.equal(agent.status().state, 'active')
  t.equal(agent.status().acceptedGeneration, 1, 'same generation: the second controller continued the first one')
})
