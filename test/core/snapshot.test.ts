// The durable state: round trip through JSON and the schema, restore after a restart (no shard moves),
// version-1 files of earlier releases, and what a changed plan on restore does.
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import { durableStateSchema } from '../../src/core/durable-state-schema.js'
import { fromVersion1, parseStoredState } from '../../src/core/snapshot-schema.js'
import type { DurableState } from '../../src/core/durable-state.js'
import type { SnapshotV1 } from '../../src/core/types.js'
import { body, cert, checkIn, controllerWith, LEASE_MS, SETTINGS, T0, claimAs } from './fixtures.js'

const settings = { ...SETTINGS, dailyIdentifyLimit: 1000 }

/** A controller with drains, handoffs, reported generations and daily grants in its state. */
function busyController(): Controller {
  const c = controllerWith([['compaq-01', 16], ['dell-01', 32]], settings)
  c.setDraining(T0, 'ghost', true)
  claimAs(c, T0, { node_id: 'dell-01', shard_id: 40 })
  checkIn(c, T0 + 1000, body('compaq-02', 16, { ready_shards: 3 }), cert('c2')) // takes shards from compaq-01 / dell-01
  checkIn(c, T0 + 2000, body('compaq-01', 16, { generation: 2 }), cert('a0'))
  return c
}

const roundTrip = (state: DurableState): DurableState => durableStateSchema.parse(JSON.parse(JSON.stringify(state))) as DurableState
const ranges = (c: Controller, now: number) => c.plan(now).nodes.map((n) => [n.nodeId, n.rangeStart, n.rangeCount])

t.test('state -> JSON -> schema -> restore gives the same plan and generation', async (t) => {
  const before = busyController()
  const state = before.snapshot()
  t.ok(state.handoffs.length > 0, 'the fixture has pending handoffs')
  const restartAt = T0 + 5000
  const after = new Controller(settings, { state: roundTrip(state), now: restartAt })
  t.same(after.snapshot(), state, 'the same state, handoffs and daily grants included')
  t.equal(after.generation, before.generation)
  t.same(ranges(after, restartAt), ranges(before, T0 + 2000), 'the same ranges, recomputed from the nodes')
  t.same(after.drainEvents(), [], 'a restart moves no shard')
  t.equal(after.persistVersion, 0, 'and has nothing to write')
  for (const node of state.nodes) {
    const again = checkIn(after, restartAt + 10, body(node.nodeId, node.capacity), cert(node.certSerial))
    t.match(again, { generation: before.generation, rotated: false }, node.nodeId)
  }
  t.same(after.drainEvents(), [], 'nor does checking in again')
})

t.test('after a restore every bucket is busy and leases count from the restart', async (t) => {
  const state = roundTrip(busyController().snapshot())
  const restartAt = T0 + 60_000 // later than every old lease
  const c = new Controller(settings, { state, now: restartAt })
  t.same(claimAs(c, restartAt, { node_id: 'compaq-01', shard_id: 1 }), { granted: false, reason: 'bucket_busy', retryAfterMs: settings.identifyIntervalMs })
  t.match(claimAs(c, restartAt + 5100, { node_id: 'compaq-01', shard_id: 1 }), { granted: true })
  t.equal(c.plan(restartAt + LEASE_MS).nodes.length, 3, 'live at exactly one lease after the restart')
  t.same(c.expireStaleNodes(restartAt + LEASE_MS + 1).sort(), ['compaq-01', 'compaq-02', 'dell-01'])
})

t.test('restored handoffs still hold, until the old owner acknowledges', async (t) => {
  const state = roundTrip(busyController().snapshot())
  const pending = state.handoffs[0]!
  const c = new Controller(settings, { state, now: T0 + 9000 })
  const owner = c.ownerOf(pending.shardId)!
  t.match(claimAs(c, T0 + 20_000, { node_id: owner, shard_id: pending.shardId }), { reason: 'handoff_pending' })
})

t.test('the daily budget survives a restart; grants outside the window are dropped', async (t) => {
  const state = roundTrip(busyController().snapshot())
  t.same(state.dailyGrants, [T0])
  const later = new Controller(settings, { state, now: T0 + 86_400_000 })
  t.same(later.snapshot().dailyGrants, [])
  const limited = new Controller({ ...settings, dailyIdentifyLimit: 1 }, { state, now: T0 + 10_000 })
  t.match(claimAs(limited, T0 + 20_000, { node_id: 'compaq-01', shard_id: 0 }), { reason: 'daily_limit', retryAfterMs: 86_400_000 - 20_000 })
  // The clock went back across the restart: the grant still counts (as made at the restart), never dropped.
  const earlier = new Controller({ ...settings, dailyIdentifyLimit: 1 }, { state, now: T0 - 5000 })
  t.same(earlier.snapshot().dailyGrants, [T0 - 5000])
  t.match(claimAs(earlier, T0, { node_id: 'compaq-01', shard_id: 0 }), { reason: 'daily_limit', retryAfterMs: 86_400_000 - 5000 })
})

t.test('a changed total_shards re-plans with a higher generation and drops the old handoffs', async (t) => {
  const state = roundTrip(busyController().snapshot())
  const c = new Controller({ ...settings, totalShards: 32 }, { state, now: T0 + 9000 })
  t.equal(c.generation, state.meta.generation + 1)
  t.equal(c.plan(T0 + 9000).unassigned, 0)
  t.same(c.snapshot().handoffs, [])
  const released = c.takeDelta().deleteHandoffs.flatMap(([first, count]) => Array.from({ length: count }, (_, k) => first + k))
  t.same(released, state.handoffs.map((h) => h.shardId), 'deleted from the store too (runs in shard order)')
})

t.test('another plan for the same nodes (a planner change across an upgrade) is a reshard', async (t) => {
  const state = roundTrip(busyController().snapshot())
  const changed = { ...state, meta: { ...state.meta, planFingerprint: '0'.repeat(64) } }
  const c = new Controller(settings, { state: changed, now: T0 + 9000 })
  t.equal(c.generation, state.meta.generation + 1, 'a new generation')
  t.match(c.drainEvents(), [{ kind: 'generation_changed' }, { kind: 'reshard', reason: 'planner', waitingFor: 3 }])
  t.match(claimAs(c, T0 + 20_000, { node_id: 'compaq-01', shard_id: 0 }), { granted: false, reason: 'handoff_pending' }, 'nothing granted until every node applied it')
})

t.test('a version-1 state file (ranges per node) restores the same plan and generation', async (t) => {
  const c = busyController()
  const now = T0 + 2000
  const state = c.snapshot()
  const byId = new Map(c.plan(now).nodes.map((n) => [n.nodeId, n]))
  const v1: SnapshotV1 = {
    version: 1,
    generation: state.meta.generation,
    totalShards: state.meta.totalShards,
    nodes: state.nodes.map((n) => ({ ...n, rangeStart: byId.get(n.nodeId)!.rangeStart, rangeCount: byId.get(n.nodeId)!.rangeCount })),
    draining: state.draining,
    handoffs: state.handoffs,
    dailyGrants: state.dailyGrants,
  }
  const parsed = parseStoredState(JSON.parse(JSON.stringify(v1)))
  t.ok(parsed.success, 'read back through the schema')
  const restored = new Controller(settings, { state: fromVersion1(v1), now: now + 1000 })
  t.equal(restored.generation, c.generation, 'same generation')
  t.same(ranges(restored, now + 1000), ranges(c, now), 'same ranges: no shard moves on the upgrade')
  t.same(restored.snapshot().handoffs, state.handoffs, 'handoffs kept')
  t.same(restored.drainEvents(), [], 'no reshard: max_concurrency was not recorded, so it is not taken for a change')
  t.ok(restored.persistVersion > 0, 'the state is written in the new form')
})

t.test('the schema refuses what is not a state', async (t) => {
  const good = busyController().snapshot()
  const bad: [string, unknown][] = [
    ['unknown key', { ...good, extra: 1 }],
    ['version 1 shape', { ...good, version: 1 }],
    ['negative generation', { ...good, meta: { ...good.meta, generation: -1 } }],
    ['bad fingerprint', { ...good, meta: { ...good.meta, planFingerprint: 'xyz' } }],
    ['bad node id', { ...good, nodes: [{ ...good.nodes[0]!, nodeId: '../x' }] }],
    ['a range in a node', { ...good, nodes: [{ ...good.nodes[0]!, rangeStart: 1 }] }],
    ['upper-case serial', { ...good, nodes: [{ ...good.nodes[0]!, certSerial: 'AB' }] }],
    ['fractional grant', { ...good, dailyGrants: [1.5] }],
    ['missing handoffs', { ...good, handoffs: undefined }],
    ['CRL number as a JSON number', { ...good, meta: { ...good.meta, crlNumber: 7 } }],
    ['CRL number with a leading zero', { ...good, meta: { ...good.meta, crlNumber: '07' } }],
    ['CRL number in hex', { ...good, meta: { ...good.meta, crlNumber: '0x07' } }],
    ['negative CRL number', { ...good, meta: { ...good.meta, crlNumber: '-1' } }],
    ['CRL number over 20 octets', { ...good, meta: { ...good.meta, crlNumber: '9'.repeat(50) } }],
  ]
  for (const [label, value] of bad) t.notOk(durableStateSchema.safeParse(value).success, label)
})

t.test('the highest CRL number: carried, persisted when it grows, restored', async (t) => {
  const c = busyController()
  c.takeDelta()
  const v = c.persistVersion
  c.recordCrlNumber(5n)
  t.ok(c.persistVersion > v, 'a higher number is a change')
  t.equal(c.takeDelta().meta.crlNumber, '5')
  const v2 = c.persistVersion
  c.recordCrlNumber(4n)
  c.recordCrlNumber(5n)
  t.equal(c.persistVersion, v2, 'an older or equal number changes nothing')
  const restored = new Controller(settings, { state: roundTrip(c.snapshot()), now: T0 + 5000 })
  t.equal(restored.crlNumber, 5n)
})
