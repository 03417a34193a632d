/**
 * The planner of SPEC "The planner": deterministic, capacity-weighted, contiguous shard ranges.
 * Pure: no I/O, no clock, no randomness.
 */
import type { NodeRange } from './types.js'

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

/** Byte-order comparison of ASCII names (UTF-16 code-unit order equals byte order for ASCII; never locale order). */
export function compareBytes(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
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

/** A plan as parallel arrays over the input order (what the controller keeps: no object per node). */
export interface OrderedPlan {
  readonly starts: Int32Array
  readonly counts: Int32Array
  readonly assigned: number
}

/**
 * Steps 2-5 over nodes already in byte order of their IDs: O(N), no sort. The controller keeps its live
 * nodes in that order between re-plans, so a drain or a join at N = 10,000 does not sort 10,000 names.
 * Throws unless the IDs strictly increase (out of order, or a duplicate: a caller bug).
 */
export function planInOrder(totalShards: number, sorted: readonly PlannerNode[]): OrderedPlan {
  for (let i = 1; i < sorted.length; i++) {
    const previous = sorted[i - 1]!.nodeId
    const current = sorted[i]!.nodeId
    if (previous === current) throw new Error(`duplicate node id ${current}`)
    if (!(previous < current)) throw new Error(`node ids out of byte order: ${previous} before ${current}`)
  }
  const counts = computeTargets(totalShards, sorted)
  const starts = new Int32Array(sorted.length)
  let cursor = 0
  for (let i = 0; i < sorted.length; i++) {
    starts[i] = cursor
    cursor += counts[i]!
  }
  return { starts, counts, assigned: cursor }
}

/** Steps 2-4: capacity-weighted targets, then the remainder handed out in whole passes. */
function computeTargets(totalShards: number, sorted: readonly PlannerNode[]): Int32Array {
  let totalCapacity = 0
  for (const node of sorted) if (!node.draining) totalCapacity += node.capacity
  // S * capacity stays far below 2^53 (65536 * 128), so the floor is exact.
  const targets = new Int32Array(sorted.length)
  let given = 0
  for (let i = 0; i < sorted.length; i++) {
    const node = sorted[i]!
    if (node.draining || totalCapacity === 0) continue
    targets[i] = Math.min(node.capacity, Math.floor((totalShards * node.capacity) / totalCapacity))
    given += targets[i]!
  }
  let remainder = Math.min(totalShards, totalCapacity) - given
  // Each pass gives at least one shard or stops, and no node takes more than its capacity, so the
  // passes are bounded by the largest capacity. In fact remainder < the number of nodes with spare
  // capacity (it is a sum of fractional parts), so at most one pass runs: O(N).
  while (remainder > 0) {
    let givenInPass = 0
    for (let i = 0; i < sorted.length && remainder > 0; i++) {
      const node = sorted[i]!
      if (node.draining || targets[i]! >= node.capacity) continue
      targets[i]! += 1
      remainder -= 1
      givenInPass += 1
    }
    if (givenInPass === 0) break
  }
  return targets
}
