// SPEC "Operator view": GET /v1/plan's leader, planner, Identify budget, pending handoffs, reshard and
// drain flags of names that are not live; a drain answer's `live`. Over real mTLS, certificates from pki/.
import t from 'tap'
import { mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { bundle, checkinBody, makePki, request, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const nodeA = await bundle(pki, 'compaq-01', 'node')
const nodeB = await bundle(pki, 'compaq-02', 'node')
const op = await bundle(pki, 'ops-alice', 'operator')

t.test('a controller with a daily limit: budget, handoffs and drain flags in the plan', async (t) => {
  const ctlRoot = join(root, 'limited')
  mkdirSync(ctlRoot)
  const ctl = await startTestController(pki, ctlRoot, { daily_identify_limit: 1000, planner: 'stable' })
  t.teardown(() => ctl.running.stop())
  const get = (path: string) => request(ctl.port, pki.ca, op, path)
  const checkIn = (id: typeof nodeA, nodeId: string, extra: Record<string, unknown> = {}) =>
    request(ctl.port, pki.ca, id, '/v1/checkin', { body: checkinBody(nodeId, { capacity: 64, ...extra }) })

  const empty = (await get('/v1/plan')).json
  t.match(empty, { leader: 'test-controller', planner: 'stable', pending_handoffs: 0, reshard: null, drain_flags_not_live: [] })
  t.same(empty.identify, { daily_limit: 1000, used_24h: 0, remaining: 1000, next_release_at: null })

  t.equal((await checkIn(nodeA, 'compaq-01')).status, 200)
  const beforeGrant = Date.now()
  const grant = await request(ctl.port, pki.ca, nodeA, '/v1/identify', { body: { node_id: 'compaq-01', shard_id: 0 } })
  t.equal(grant.json.granted, true, grant.text)
  const granted = (await get('/v1/plan')).json
  t.match(granted.identify, { daily_limit: 1000, used_24h: 1, remaining: 999 })
  const release = Date.parse(granted.identify.next_release_at)
  t.ok(release >= beforeGrant + 86_400_000 && release <= Date.now() + 86_400_000, `next_release_at ${granted.identify.next_release_at} is the grant + 24 h`)

  // B joins: half of A's shards move to B and wait for A's release.
  const a1 = (await checkIn(nodeA, 'compaq-01', { generation: 1 })).json
  t.equal(a1.generation, 1)
  const b = (await checkIn(nodeB, 'compaq-02')).json
  t.equal(b.range_count, 32)
  const moved = (await get('/v1/plan')).json
  t.equal(moved.pending_handoffs, 32, 'B\'s 32 shards wait for A')
  t.match(moved.nodes, [{ node_id: 'compaq-01', pending_handoffs: 32 }, { node_id: 'compaq-02', pending_handoffs: 0 }])
  // A applies the new generation: released.
  await checkIn(nodeA, 'compaq-01', { generation: moved.generation })
  const released = (await get('/v1/plan')).json
  t.equal(released.pending_handoffs, 0)
  t.same(released.nodes.map((n: { pending_handoffs: number }) => n.pending_handoffs), [0, 0])

  // A drain of a live node and of a name that has never checked in.
  const live = await request(ctl.port, pki.ca, op, '/v1/nodes/compaq-02/drain', { body: { draining: true } })
  t.same(live.json, { node_id: 'compaq-02', draining: true, generation: released.generation + 1, live: true, unassigned: 0 })
  const ghost = await request(ctl.port, pki.ca, op, '/v1/nodes/ghost-07/drain', { body: { draining: true } })
  t.same(ghost.json, { node_id: 'ghost-07', draining: true, generation: released.generation + 1, live: false, unassigned: 0 }, 'a flag on a name that is not live changes no plan')
  const drained = (await get('/v1/plan')).json
  t.same(drained.drain_flags_not_live, ['ghost-07'], 'only the name that is not live')
  t.equal(drained.pending_handoffs, 32, 'B\'s shards went back to A and wait for B')
  t.match(drained.nodes[1], { node_id: 'compaq-02', draining: true, range_count: 0, pending_handoffs: 32 })
  const audit = readFileSync(join(ctlRoot, 'audit.log'), 'utf8')
  t.match(audit, /"event":"drain_set"[^\n]*"node_id":"ghost-07"[^\n]*"live":false/, 'the audit line says the name was not live')

  // Unflagging the ghost clears it from the list.
  await request(ctl.port, pki.ca, op, '/v1/nodes/ghost-07/drain', { body: { draining: false } })
  t.same((await get('/v1/plan')).json.drain_flags_not_live, [])
})

t.test('without a daily limit the budget fields are null', async (t) => {
  mkdirSync(join(root, 'unlimited'))
  const ctl = await startTestController(pki, join(root, 'unlimited'))
  t.teardown(() => ctl.running.stop())
  const plan = (await request(ctl.port, pki.ca, op, '/v1/plan')).json
  t.same(plan.identify, { daily_limit: null, used_24h: null, remaining: null, next_release_at: null })
  t.equal(plan.planner, 'contiguous')
})
