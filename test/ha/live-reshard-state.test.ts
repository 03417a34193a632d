// The etcd state layout keeps a live reshard in progress and a switched shard count (SPEC "Live
// resharding": "survives a restart and a take-over"): a whole write and a delta write load back as the
// controller's snapshot, and a new leader restores the same next set. etcd's key space is a sorted map here;
// test/e2e/live-reshard.test.ts runs the file store and the process.
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import type { ControllerSettings } from '../../src/core/types.js'
import { decodeState } from '../../src/ha/state-decode.js'
import { StateLayout } from '../../src/ha/state-layout.js'
import { deltaWrites, reconcileWrites, type WriteContext } from '../../src/ha/state-writes.js'
import { HandoffRunIndex } from '../../src/ha/handoff-runs.js'
import type { WriteOp } from '../../src/ha/etcd-limits.js'
import { body, cert, checkIn, T0 } from '../core/fixtures.js'

const layout = new StateLayout('/pxe/')

function apply(kv: Map<string, string>, ops: readonly WriteOp[]): void {
  for (const op of ops) {
    if (op.type === 'put') kv.set(op.key, op.value.toString())
    else if (op.type === 'delete') kv.delete(op.key)
    else {
      const [from, to] = op.type === 'delete_prefix' ? [op.prefix, `${op.prefix}\uffff`] : [op.key, op.rangeEnd]
      for (const key of [...kv.keys()]) if (key >= from && key < to) kv.delete(key)
    }
  }
}

function entries(kv: Map<string, string>) {
  return [...kv.keys()]
    .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
    .map((key) => ({ key, value: Buffer.from(kv.get(key)!), createRevision: '1', modRevision: '1', version: '1', lease: '0' }))
}

for (const planner of ['contiguous', 'stable'] as const) {
  t.test(`${planner}: a reshard in progress and a switched count load back whole`, async (t) => {
    const settings: ControllerSettings = { totalShards: 8, maxConcurrency: 4, leaseSeconds: 30, identifyIntervalMs: 5100, dailyIdentifyLimit: 50, planner }
    let n = 0
    const ctx: WriteContext = { layout, grantId: () => `9.${++n}` }
    const c = new Controller(settings)
    // agents that run a next set say so (next_ready_shards 0): otherwise the reshard is refused
    checkIn(c, T0, body('n1', 8, { next_ready_shards: 0 }), cert('a1'))
    checkIn(c, T0, body('n2', 8, { next_ready_shards: 0 }), cert('a2'))
    const kv = new Map<string, string>()
    let { phases, runs } = reconcileWrites([], c.snapshot(), ctx)
    let ops = phases.flat()
    apply(kv, ops)
    c.takeDelta()

    c.startReshard(T0 + 1, 16)
    checkIn(c, T0 + 2, body('n3', 8, { next_ready_shards: 0 }), cert('a3')) // a join: next-set handoffs pending
    apply(kv, deltaWrites(c.takeDelta(), ctx, runs))
    const loaded = decodeState(layout, entries(kv))
    t.same(loaded, c.snapshot(), 'the delta write loads as the snapshot')
    t.ok(loaded?.meta.liveReshard !== undefined && loaded.meta.liveReshard.handoffs.length > 0, 'with the next-set handoffs')
    const leader = new Controller(settings, { state: loaded!, now: T0 + 5 })
    t.same(leader.plan(T0 + 5).reshard, c.plan(T0 + 5).reshard, 'a new leader continues the same reshard')

    // the switch, then a reconcile of a torn state
    const gen = c.generation
    for (const [id, serial] of [['n1', 'a1'], ['n2', 'a2'], ['n3', 'a3']] as const) {
      const next = c.checkinOutcome(id, { rotated: false, previousSerial: null }, 0).next!
      checkIn(c, T0 + 3, body(id, 8, { generation: gen, next_ready_shards: next.rangeCount }), cert(serial))
    }
    t.equal(c.totalShards, 16)
    apply(kv, deltaWrites(c.takeDelta(), ctx, runs))
    const switched = decodeState(layout, entries(kv))
    t.same(switched, c.snapshot(), 'the switch loads as the snapshot')
    t.equal(switched?.meta.configuredTotalShards, 8)
    ;({ phases, runs } = reconcileWrites(entries(kv), c.snapshot(), ctx))
    ops = phases.flat()
    t.same(ops.length, 0, 'a reconcile of the same state writes nothing')
    const after = new Controller(settings, { state: switched!, now: T0 + 6 })
    t.equal(after.totalShards, 16, 'a new leader on the unchanged configuration runs 16 shards')
    t.equal(after.generation, c.generation)
    void runs
  })
}
