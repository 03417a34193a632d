// The index of handoff runs an etcd store keeps (src/ha/handoff-runs.ts): which keys a delta's shard runs
// touch, the pieces that stay when a run goes in part, and the reconcile that keeps what still holds.
import t from 'tap'
import { HandoffRunIndex, groupHandoffs, reconcileHandoffRuns } from '../../src/ha/handoff-runs.js'
import type { WriteOp } from '../../src/ha/etcd-limits.js'
import { StateLayout } from '../../src/ha/state-layout.js'

const layout = new StateLayout('/p/')
const named = (ops: readonly WriteOp[]) => ops.map((op) => ('key' in op ? op.key.replace('/p/state/handoff-run/', '') : op.prefix))
const runsOf = (index: HandoffRunIndex) => index.list().map((r) => [r.first, r.count, r.fromNode, r.generation])

function indexWith(...runs: [number, number, string, number][]): HandoffRunIndex {
  const index = new HandoffRunIndex(layout)
  for (const [first, count, fromNode, generation] of runs) index.adopt({ key: layout.handoffRun(first, count, generation), first, count, fromNode, generation })
  return index
}

t.test('releases in the middle of a run leave its pieces, put before the run is deleted', async (t) => {
  const index = indexWith([0, 1000, 'a', 2], [1000, 24, 'b', 2])
  const { puts, deletes } = index.change([], [
    [10, 5],
    [500, 1],
    [990, 20],
  ])
  // (the piece 15-999 left by the first release is cut by the next ones within the change: never written)
  t.same(named(puts), ['00000/00010/0000000000000002', '00015/00485/0000000000000002', '00501/00489/0000000000000002', '01010/00014/0000000000000002'])
  t.same(named(deletes), ['00000/01000/0000000000000002', '01000/00024/0000000000000002'], 'both runs touched go')
  t.same(runsOf(index), [
    [0, 10, 'a', 2],
    [15, 485, 'a', 2],
    [501, 489, 'a', 2],
    [1010, 14, 'b', 2],
  ])
  t.equal(index.size, 4)
})

t.test('a newer run over part of an older one: the older one’s pieces stay, the new run is one key', async (t) => {
  const index = indexWith([0, 100, 'a', 2])
  const { puts, deletes } = index.change([[40, 200, 'c', 5]], [])
  t.same(named(puts), ['00000/00040/0000000000000002', '00040/00200/0000000000000005'])
  t.same(named(deletes), ['00000/00100/0000000000000002'])
})

t.test('the same run put again writes nothing', async (t) => {
  const index = indexWith([8, 8, 'a', 3])
  t.same(index.change([[8, 8, 'a', 3]], []), { puts: [], deletes: [] }, 'a re-put of what etcd holds')
  t.same(runsOf(index), [[8, 8, 'a', 3]])
  // (the controller gives a shard one handoff per generation; should a value under the same key differ, it is
  // rewritten in place, never deleted after being put)
  const { puts, deletes } = index.change([[8, 8, 'b', 3]], [])
  t.same(named(puts), ['00008/00008/0000000000000003'])
  t.same(deletes, [], 'the key is not deleted after it was put')
})

t.test('groupHandoffs: consecutive shards with one node and generation', async (t) => {
  t.same(
    groupHandoffs([
      { shardId: 3, fromNode: 'a', generation: 2 },
      { shardId: 1, fromNode: 'a', generation: 2 },
      { shardId: 2, fromNode: 'a', generation: 2 },
      { shardId: 4, fromNode: 'a', generation: 3 },
      { shardId: 6, fromNode: 'a', generation: 3 },
      { shardId: 7, fromNode: 'b', generation: 3 },
    ]),
    [
      { first: 1, count: 3, fromNode: 'a', generation: 2 },
      { first: 4, count: 1, fromNode: 'a', generation: 3 },
      { first: 6, count: 1, fromNode: 'a', generation: 3 },
      { first: 7, count: 1, fromNode: 'b', generation: 3 },
    ],
  )
})

t.test('reconcile: runs that still hold stay, the rest is rewritten, per-shard keys become runs', async (t) => {
  const run = (first: number, count: number, fromNode: string, generation: number) => ({ key: layout.handoffRun(first, count, generation), first, count, fromNode, generation })
  const stored = [
    run(0, 4, 'a', 2), // still true: stays
    run(2, 2, 'a', 2), // a piece of the first (a torn split): overlaps a kept run, goes
    run(4, 4, 'b', 2), // shard 7 was released meanwhile: goes, 4-6 rewritten
    { key: layout.legacyHandoff(9, 2), first: 9, count: 1, fromNode: 'c', generation: 2 }, // earlier layout: rewritten as a run
  ]
  const wanted = [0, 1, 2, 3].map((s) => ({ shardId: s, fromNode: 'a', generation: 2 }))
  wanted.push(...[4, 5, 6].map((s) => ({ shardId: s, fromNode: 'b', generation: 2 })), { shardId: 9, fromNode: 'c', generation: 2 })
  const { puts, deletes, index } = reconcileHandoffRuns(layout, stored, wanted)
  t.same(named(puts), ['00004/00003/0000000000000002', '00009/00001/0000000000000002'])
  t.same(
    deletes.map((op) => ('key' in op ? op.key : '')),
    [layout.handoffRun(2, 2, 2), layout.handoffRun(4, 4, 2), layout.legacyHandoff(9, 2)],
  )
  t.same(runsOf(index), [
    [0, 4, 'a', 2],
    [4, 3, 'b', 2],
    [9, 1, 'c', 2],
  ])
})
