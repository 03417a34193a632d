// A node revoked while it is cut off from the controller keeps running its shards until its own
// fail-safe stops them (it cannot hear of the revocation). The controller takes it out of the plan at
// once, but grants the new owner no Identify for its shards until its lease, as it stood at the
// revocation, has run out (SPEC "Leases"): no moment in which two sessions run one shard. Before this
// rule the new owner started a shard as soon as the CRL was loaded, seconds before the revoked node's
// fail-safe stopped it.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { revoke } from '../../pki/revocation.js'
import { bundle, makePki, request } from '../e2e/harness.js'
import { frozenProxy } from '../support/frozen-proxy.js'
import { Recorder, controllerIn, nodeIdentities, recordingAgent, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const [idA, idB] = await nodeIdentities(pki, ['node-a', 'node-b'])
const op = await bundle(pki, 'ops', 'operator')

t.test('revoked while cut off: its shards move at once, but start elsewhere only after its fail-safe stopped them', async (t) => {
  const lease = 9
  const ctl = await controllerIn(pki, join(root, 'c'), { total_shards: 4, max_concurrency: 4, lease_seconds: lease, identify_interval_ms: 5000 })
  t.teardown(() => ctl.running.stop())
  const proxy = await frozenProxy(ctl.port)
  t.teardown(() => proxy.close())
  const rec = new Recorder()
  // node-a sorts first and holds 0..1, reaching the controller through the proxy; node-b holds 2..3
  const a = recordingAgent(rec, idA, [urlOf(proxy.port)], { capacity: 2 })
  const b = recordingAgent(rec, idB, [urlOf(ctl.port)], { capacity: 4 })
  t.teardown(() => Promise.all([a.stop(), b.stop()]))
  await a.start()
  await until('node-a runs 0 and 1', () => rec.running('node-a').join() === '0,1', 20_000)
  await b.start()
  await until('node-b runs 2 and 3', () => rec.running('node-b').join() === '2,3', 20_000)

  proxy.freeze() // node-a is cut off: it hears nothing of what follows
  await revoke(pki.dir, { name: 'node-a' })
  let removedAt = 0
  for (;;) {
    const plan = await request(ctl.port, pki.ca, op, '/v1/plan')
    if (!plan.json.nodes.some((n: { node_id: string }) => n.node_id === 'node-a')) {
      removedAt = performance.now()
      t.match(plan.json.nodes, [{ node_id: 'node-b', range_start: 0, range_count: 4 }], 'node-b holds every shard in the plan at once')
      t.ok(plan.json.pending_handoffs >= 2, `the shards node-a had wait for it (${plan.json.pending_handoffs} pending handoffs)`)
      break
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  await until('node-b runs every shard', () => rec.running('node-b').join() === '0,1,2,3', (lease + 10) * 1000)
  t.same(rec.overlaps(), [], 'no shard ran on two nodes at once')
  const aStops = rec.shardEvents.filter((e) => e.node === 'node-a' && e.kind === 'stop')
  const bStarts = rec.shardEvents.filter((e) => e.node === 'node-b' && e.kind === 'start' && e.shard < 2)
  t.equal(aStops.length, 2, 'node-a stopped both by its fail-safe')
  for (const start of bStarts) {
    const stop = aStops.find((e) => e.shard === start.shard)!
    t.ok(start.at > stop.at, `shard ${start.shard}: node-b started ${Math.round(start.at - stop.at)} ms after node-a stopped it`)
  }
  t.ok(Math.min(...bStarts.map((e) => e.at)) - removedAt > 1000, 'the new owner waited, rather than starting as soon as the CRL was loaded')
  const lines = readFileSync(join(root, 'c', 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event: string; node_id?: string; shard_id?: number })
  const audit = lines.filter((l) => l.event === 'identify_granted' && l.node_id === 'node-b' && (l.shard_id === 0 || l.shard_id === 1))
  t.equal(audit.length, 2, 'each granted once')
})
