// pxe-ctl's pure parts: ages, ranges and aligned tables; the dry run on the SPEC's worked example.
import t from 'tap'
import { dryRunDrain, movedLine } from '../../src/ctl/dry-run.js'
import { age, renderTable, shardRange } from '../../src/ctl/table.js'
import { stillHeld } from '../../src/ctl/commands/drain-wait.js'
import type { Plan } from '../../src/ctl/wire.js'

t.test('age, as kubectl prints one', async (t) => {
  const cases: [number, string][] = [[-5, '0s'], [0, '0s'], [3_400, '3s'], [60_000, '1m'], [252_000, '4m12s'], [7_500_000, '2h5m'], [3_600_000, '1h'], [273_600_000, '3d4h'], [86_400_000, '1d']]
  for (const [ms, text] of cases) t.equal(age(ms), text, `${ms} ms`)
})

t.test('shard ranges and table alignment', async (t) => {
  t.equal(shardRange(0, 0), '-')
  t.equal(shardRange(5, 1), '5')
  t.equal(shardRange(16, 16), '16-31')
  t.equal(renderTable(['A', 'NUM', 'Z'], [['long-name', '7', 'x'], ['b', '123', '']], new Set([1])), 'A          NUM  Z\nlong-name    7  x\nb          123')
})

function plan(nodes: [string, number, number, number, boolean?][], totalShards: number, planner?: string): Plan {
  return {
    generation: 3, total_shards: totalShards, max_concurrency: 1, lease_seconds: 30, unassigned: 0, ...(planner ? { planner } : {}),
    nodes: nodes.map(([node_id, capacity, range_start, range_count, draining]) => ({
      node_id, capacity, draining: draining === true, range_start, range_count, last_seen: new Date(0).toISOString(), generation: 3, ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0,
    })),
  }
}

t.test('dry run, contiguous: the SPEC example (100 shards, a:16 b:16 c:128, d drained): d again moves nothing; c moves 86', async (t) => {
  const p = plan([['a', 16, 0, 10], ['b', 16, 10, 10], ['c', 128, 20, 80], ['d', 16, 100, 0, true]], 100)
  t.equal(dryRunDrain(p, 'd').moved, 0, 'd already draining')
  const c = dryRunDrain(p, 'c')
  // a and b fill to capacity: a 0-15 takes b's 10-15, b 16-31 keeps 16-19 and takes c's 20-31; c's 32-99 are left unassigned.
  t.same(c.to, { a: 6, b: 12 })
  t.equal(c.to_unassigned, 68)
  t.equal(c.moved, 86)
  t.equal(c.unassigned_after, 68)
  t.equal(movedLine(c), '86 shards would move: 6 to a, 12 to b, 68 to no node (unassigned: no capacity left)')
  t.equal(c.planner, 'contiguous')
  t.equal(c.planner_reported, false)
})

t.test("dry run, stable: only the drained node's shards move, to its neighbours", async (t) => {
  const p = plan([['a', 32, 0, 16], ['b', 32, 16, 16], ['c', 32, 32, 16], ['d', 32, 48, 16]], 64, 'stable')
  const b = dryRunDrain(p, 'b')
  t.equal(b.moved, 16)
  t.same(Object.keys(b.to).sort(), ['a', 'c'])
  t.same(b.to, { a: 8, c: 8 })
  t.same(b.nodes.find((n) => n.node_id === 'd'), { node_id: 'd', range_start: 48, range_count: 16, next_range_start: 48, next_range_count: 16 }, 'd keeps its range')
  t.equal(b.unassigned_after, 0)
  t.throws(() => dryRunDrain({ ...p, planner: 'quantum' }, 'b'), /plans with "quantum", which this pxe-ctl does not know/)
})

t.test('drain --wait: what a node still holds, with and without the handoff count of newer controllers', async (t) => {
  const node = { node_id: 'b', capacity: 8, draining: true, range_start: 8, range_count: 0, last_seen: '', generation: 4, ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 }
  t.equal(stillHeld(undefined, 5), null, 'gone from the live set: done')
  t.equal(stillHeld({ ...node, pending_handoffs: 0 }, 5), null, 'no shard, no handoff: done')
  t.equal(stillHeld({ ...node, pending_handoffs: 3 }, 5), '3 shards wait for b to release them')
  t.equal(stillHeld({ ...node, range_count: 1, pending_handoffs: 1 }, 5), 'b holds 1 shard (8), 1 shard waits for b to release it')
  t.equal(stillHeld(node, 5), 'b has not yet reported generation 5 (its release)', 'an older controller: the reported generation decides')
  t.equal(stillHeld({ ...node, generation: 5 }, 5), null)
})
