import t from 'tap'
import { compareBytes } from '../../src/core/planner.js'
import { planInOrder, planShards, type PlannerNode } from '../support/planner-by-name.js'

type Row = {
  name: string
  shards: number
  nodes: string // "id:capacity" or "id:capacity:d", comma separated
  ranges: Record<string, [number, number]>
  unassigned: number
}

// SPEC "The planner", worked examples, row by row.
const table: Row[] = [
  {
    name: 'equal and double capacity',
    shards: 64,
    nodes: 'compaq-01:16,compaq-02:16,dell-01:32',
    ranges: { 'compaq-01': [0, 16], 'compaq-02': [16, 16], 'dell-01': [32, 32] },
    unassigned: 0,
  },
  { name: 'capacity short of S', shards: 10, nodes: 'a:3,b:3,c:3', ranges: { a: [0, 3], b: [3, 3], c: [6, 3] }, unassigned: 1 },
  {
    name: 'a draining node',
    shards: 100,
    nodes: 'a:16,b:16,c:128,d:16:d',
    ranges: { a: [0, 10], b: [10, 10], c: [20, 80], d: [100, 0] },
    unassigned: 0,
  },
  { name: 'remainder pass', shards: 7, nodes: 'n1:4,n2:4,n3:4', ranges: { n1: [0, 3], n2: [3, 2], n3: [5, 2] }, unassigned: 0 },
  {
    name: 'byte order, not locale order',
    shards: 5,
    nodes: 'Zeta:2,alpha:2,beta:2',
    ranges: { Zeta: [0, 2], alpha: [2, 2], beta: [4, 1] },
    unassigned: 0,
  },
]

function parseNodes(spec: string): PlannerNode[] {
  return spec.split(',').map((item) => {
    const [nodeId, capacity, flag] = item.split(':')
    return { nodeId: nodeId!, capacity: Number(capacity), draining: flag === 'd' }
  })
}

for (const row of table) {
  t.test(`worked example: ${row.name}`, async (t) => {
    const nodes = parseNodes(row.nodes)
    for (const input of [nodes, [...nodes].reverse()]) {
      const plan = planShards(row.shards, input)
      const got = Object.fromEntries([...plan.ranges].map(([id, r]) => [id, [r.rangeStart, r.rangeCount]]))
      t.same(got, row.ranges)
      t.same([...plan.ranges.keys()], Object.keys(row.ranges), 'byte order')
      t.equal(plan.unassigned, row.unassigned)
      t.equal(plan.assigned, row.shards - row.unassigned)
    }
  })
}

t.test('no nodes, and only draining nodes, leave every shard unassigned', async (t) => {
  t.same(planShards(8, []), { ranges: new Map(), assigned: 0, unassigned: 8 })
  const plan = planShards(8, [{ nodeId: 'a', capacity: 4, draining: true }])
  t.same(plan.ranges.get('a'), { rangeStart: 0, rangeCount: 0 })
  t.equal(plan.unassigned, 8)
})

t.test('an empty node stands at the cursor between its neighbours', async (t) => {
  const plan = planShards(4, [
    { nodeId: 'a', capacity: 2, draining: false },
    { nodeId: 'b', capacity: 9, draining: true },
    { nodeId: 'c', capacity: 2, draining: false },
  ])
  t.same(plan.ranges.get('b'), { rangeStart: 2, rangeCount: 0 })
  t.same(plan.ranges.get('c'), { rangeStart: 2, rangeCount: 2 })
})

t.test('one shard over many nodes goes to the first in byte order', async (t) => {
  const nodes = ['b', 'B', 'a', '0'].map((nodeId) => ({ nodeId, capacity: 1, draining: false }))
  const plan = planShards(1, nodes)
  t.same(plan.ranges.get('0'), { rangeStart: 0, rangeCount: 1 })
  t.equal(plan.assigned, 1)
})

t.test('duplicate node IDs are a caller bug', async (t) => {
  t.throws(() => planShards(4, [{ nodeId: 'a', capacity: 1, draining: false }, { nodeId: 'a', capacity: 2, draining: false }]))
})

t.test('compareBytes is code-unit order', async (t) => {
  t.equal(compareBytes('Zeta', 'alpha'), -1)
  t.equal(compareBytes('a-b', 'a.b'), -1) // '-' 0x2d < '.' 0x2e
  t.equal(compareBytes('a_b', 'ab'), -1) // '_' 0x5f < 'b' 0x62
  t.equal(compareBytes('x', 'x'), 0)
  t.equal(compareBytes('b', 'B'), 1)
})

t.test('planInOrder gives the same ranges over nodes already in byte order, and refuses any other order', async (t) => {
  const nodes = ['0', 'B', 'a', 'b'].map((nodeId, i) => ({ nodeId, capacity: 1 + i, draining: nodeId === 'a' }))
  const ordered = planInOrder(7, nodes)
  const reference = planShards(7, [...nodes].reverse())
  t.same(
    nodes.map((n, i) => ({ rangeStart: ordered.starts[i], rangeCount: ordered.counts[i] })),
    nodes.map((n) => reference.ranges.get(n.nodeId)),
  )
  t.equal(ordered.assigned, reference.assigned)
  t.throws(() => planInOrder(7, [nodes[1]!, nodes[0]!]), /out of byte order: B before 0/)
  t.throws(() => planInOrder(7, [nodes[0]!, nodes[0]!]), /duplicate node id 0/)
})
