// Real agents against a real controller over mTLS: joining, and a plan change that moves shards with
// the handoff released by the old owner's report, long before its lease would have run out.
import t from 'tap'
import { makePki, request, startTestController, bundle } from '../e2e/harness.js'
import { Recorder, nodeIdentities, recordingAgent, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const [idA, idB] = await nodeIdentities(pki, ['node-a', 'node-b'])
const op = await bundle(pki, 'ops', 'operator')
// 4 shards in 4 buckets: node-a's shards are all granted at once on a fresh controller.
const ctl = await startTestController(pki, root, { total_shards: 4, max_concurrency: 4, lease_seconds: 6, identify_interval_ms: 5000 })
t.teardown(() => ctl.running.stop())
const rec = new Recorder()
const a = recordingAgent(rec, idA, [urlOf(ctl.port)])
const b = recordingAgent(rec, idB, [urlOf(ctl.port)])
t.teardown(async () => {
  await a.stop()
  await b.stop()
})
const plan = async () => (await request(ctl.port, pki.ca, op, '/v1/plan')).json

t.test('join: the plan is accepted, every shard claimed and started, the generation reported', async (t) => {
  await a.start()
  await until('node-a runs its 4 shards', () => rec.running('node-a').length === 4)
  t.same(rec.running('node-a'), [0, 1, 2, 3])
  const status = a.status()
  t.equal(status.state, 'active')
  t.equal(status.acceptedGeneration, 1)
  t.same(status.running, [0, 1, 2, 3])
  t.equal(status.controller, urlOf(ctl.port))
  t.ok(status.lastRenewalSentAt !== null && status.authorityEndsAt !== null && status.authorityEndsAt > Date.now(), 'authority held')
  t.equal(rec.events('node-a', 'claim').filter((e) => e.event.outcome.kind === 'granted').length, 4, 'one grant per shard')
  await until('node-a reports generation 1', () => a.status().reportedGeneration === 1)
})

t.test('a plan change moves shards: the old owner stops and reports, the new owner is granted long before the old lease ends', async (t) => {
  // Buckets 2 and 3 were granted to node-a at its join: wait out the Identify interval so that only
  // the handoff can hold node-b back.
  const lastGrant = Math.max(...rec.events('node-a', 'claim').map((e) => e.at))
  await new Promise((r) => setTimeout(r, Math.max(0, lastGrant + 5200 - performance.now())))
  await b.start()
  await until('node-b runs shards 2 and 3', () => rec.running('node-b').length === 2)
  t.same(rec.running('node-a'), [0, 1], 'node-a kept 0 and 1')
  t.same(rec.running('node-b'), [2, 3], 'node-b runs 2 and 3')
  t.same(rec.overlaps(), [], 'no shard ran on two nodes at once')
  const stops = rec.shardEvents.filter((e) => e.node === 'node-a' && e.kind === 'stop')
  t.same(stops.map((e) => [e.shard, e.reason]).sort(), [[2, 'plan'], [3, 'plan']], 'node-a stopped what it lost, because of the plan')

  const claims = rec.events('node-b', 'claim')
  const firstPending = claims.find((e) => e.event.outcome.kind === 'wait' && e.event.outcome.reason === 'handoff_pending')
  t.ok(firstPending, 'node-b was first told to wait for the handoff')
  const grants = claims.filter((e) => e.event.outcome.kind === 'granted')
  t.equal(grants.length, 2, 'node-b was granted both shards')
  if (firstPending && firstPending.event.outcome.kind === 'wait') {
    const leaseLeft = firstPending.event.outcome.retryAfterMs
    const waited = Math.max(...grants.map((g) => g.at)) - firstPending.at
    t.comment(`handoff: granted ${Math.round(waited)} ms after the first handoff_pending; node-a's lease would have run ${leaseLeft} ms more`)
    t.ok(waited < leaseLeft, 'both grants came before node-a\'s lease would have run out')
  }
  const view = await plan()
  const nodeA = view.nodes.find((n: { node_id: string }) => n.node_id === 'node-a')
  t.equal(nodeA.generation, 2, 'node-a reported generation 2 to the controller')
  t.equal(a.status().reportedGeneration, 2)
  t.equal(b.status().acceptedGeneration, 2)
})
