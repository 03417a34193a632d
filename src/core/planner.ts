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
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i - 1]!.nodeId === sorted[i]!.nodeId) throw new Error(`duplicate node id ${sorted[i]!.nodeId}`)
  }
  const targets = computeTargets(totalShards, sorted)
  const ranges = new Map<string, NodeRange>()
  let cursor = 0
  sorted.forEach((node, i) => {
    const rangeCount = targets[i]!
    ranges.set(node.nodeId, { rangeStart: cursor, rangeCount })
    cursor += rangeCount
  })
  return { ranges, assigned: cursor, unassigned: totalShards - cursor }
}

/** Steps 2-4: capacity-weighted targets, then the remainder handed out in whole passes. */
function computeTargets(totalShards: number, sorted: readonly PlannerNode[]): number[] {
  let totalCapacity = 0
  for (const node of sorted) if (!node.draining) totalCapacity += node.capacity
  // S * capacity stays far below 2^53 (65536 * 128), so the floor is exact.
  const targets = sorted.map((node) =>
    node.draining || totalCapacity === 0
      ? 0
      : Math.min(node.capacity, Math.floor((totalShards * node.capacity) / totalCapacity)),
  )
  let remainder = Math.min(totalShards, totalCapacity) - targets.reduce((sum, t) => sum + t, 0)
  // Each pass gives at least one shard or stops, and no node takes more than its capacity, so the
  // passes are bounded by the largest capacity. In fact remainder < the number of nodes with spare
  // capacity (it is a sum of fractional parts), so at most one pass runs: O(N).
  while (remainder > 0) {
    let given = 0
    for (let i = 0; i < sorted.length && remainder > 0; i++) {
      const node = sorted[i]!
      if (node.draining || targets[i]! >= node.capacity) continue
      targets[i]! += 1
      remainder -= 1
      given += 1
    }
    if (given === 0) break
  }
  return targets
}
