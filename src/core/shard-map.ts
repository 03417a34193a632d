/** The shard → node mapping of a plan, as a typed array of node IDs (fast to build and to diff). */
import { NO_NODE, type NodeIndex } from './node-index.js'
import type { NodeRange } from './types.js'

/** Owner ID of each shard (NO_NODE: unassigned) for `ranges` over `totalShards` shards; O(S). */
export function ownersFromRanges(
  ranges: ReadonlyMap<string, NodeRange>,
  totalShards: number,
  nodes: NodeIndex,
): Int32Array {
  const owners = new Int32Array(totalShards).fill(NO_NODE)
  for (const [nodeId, { rangeStart, rangeCount }] of ranges) {
    if (rangeCount === 0) continue
    const end = rangeStart + rangeCount
    if (rangeStart < 0 || end > totalShards) {
      throw new RangeError(`range of ${nodeId} lies outside 0..${totalShards - 1}`)
    }
    // Ranges come from the planner only (never read back from disk), which lays them without overlap.
    owners.fill(nodes.idOf(nodeId), rangeStart, end)
  }
  return owners
}

/** True when two range maps hold the same nodes with the same ranges (empty ranges included). */
export function sameRanges(a: ReadonlyMap<string, NodeRange>, b: ReadonlyMap<string, NodeRange>): boolean {
  if (a.size !== b.size) return false
  for (const [nodeId, range] of a) {
    const other = b.get(nodeId)
    if (other === undefined || other.rangeStart !== range.rangeStart || other.rangeCount !== range.rangeCount) {
      return false
    }
  }
  return true
}
