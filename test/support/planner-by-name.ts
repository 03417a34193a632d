/**
 * The planner by node name (SPEC "The planner", steps 1-5): the product plans over the controller's kept
 * byte order (core/live-plan.ts, planOrdered); the tests and the bench plan a list of nodes in any order.
 */
import { compareBytes, planOrdered, type OrderedPlan } from '../../src/core/planner.js'
import type { NodeRange } from '../../src/core/types.js'

/** What the planner needs to know of a live node. */
export interface PlannerNode {
  readonly nodeId: string
  readonly capacity: number
  readonly draining: boolean
}

/** The planner's answer: a range per live node (draining ones included), and the totals. */
export interface ShardPlan {
  /** Every input node, inserted in byte order of node IDs. */
  readonly ranges: Map<string, NodeRange>
  readonly assigned: number
  readonly unassigned: number
}

/**
 * Plans `totalShards` shards over `nodes` (SPEC steps 1-5). O(N log N + N): the shard count only
 * enters through arithmetic. Throws on a duplicate node ID (a caller bug, not user input).
 */
export function planShards(totalShards: number, nodes: readonly PlannerNode[]): ShardPlan {
  const sorted = [...nodes].sort((a, b) => compareBytes(a.nodeId, b.nodeId))
  const { starts, counts, assigned } = planInOrder(totalShards, sorted)
  const ranges = new Map<string, NodeRange>()
  sorted.forEach((node, i) => ranges.set(node.nodeId, { rangeStart: starts[i]!, rangeCount: counts[i]! }))
  return { ranges, assigned, unassigned: totalShards - assigned }
}

/**
 * Steps 2-5 over nodes already in byte order of their IDs: O(N), no sort. Throws unless the IDs strictly
 * increase (out of order, or a duplicate: a caller bug).
 */
export function planInOrder(totalShards: number, sorted: readonly PlannerNode[]): OrderedPlan {
  for (let i = 1; i < sorted.length; i++) {
    const previous = sorted[i - 1]!.nodeId
    const current = sorted[i]!.nodeId
    if (previous === current) throw new Error(`duplicate node id ${current}`)
    if (!(previous < current)) throw new Error(`node ids out of byte order: ${previous} before ${current}`)
  }
  const capacities = Int32Array.from(sorted, (node) => node.capacity)
  const draining = Uint8Array.from(sorted, (node) => (node.draining ? 1 : 0))
  return planOrdered(totalShards, capacities, draining)
}
