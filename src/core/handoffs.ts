/**
 * Pending handoffs (SPEC "Handoff safety"): a shard taken from a live node A at generation g stays
 * closed to its new owner until A acknowledges g, expires, or is revoked.
 */
import { NO_NODE, type NodeIndex } from './node-index.js'

/** One shard whose previous owner has not released it yet. */
export interface HandoffEntry {
  readonly shardId: number
  readonly fromNode: string
  readonly generation: number
}

/**
 * One slot per shard (so never more than S entries) in typed arrays: a re-plan that moves every
 * shard costs a few nanoseconds per shard. Per node, a count and the lowest pending generation
 * tell whether a release has anything to do, so a check-in of a node with nothing to release
 * never scans the shards.
 */
export class HandoffLedger {
  private readonly from: Int32Array
  private readonly generation: Float64Array
  /** Per node ID: how many shards wait for it, and a lower bound of their generations (exact after a scan). */
  private pendingCount = new Int32Array(64)
  private lowestGeneration = new Float64Array(64).fill(Infinity)

  /** @param onChange told of every shard whose handoff entry was set or cleared (persistence tracking) */
  constructor(
    totalShards: number,
    private readonly nodes: NodeIndex,
    private readonly onChange: (shardId: number) => void = () => undefined,
  ) {
    this.from = new Int32Array(totalShards).fill(NO_NODE)
    this.generation = new Float64Array(totalShards)
  }

  /** The node ID a shard waits for, or NO_NODE. */
  fromOf(shardId: number): number {
    return this.from[shardId] ?? NO_NODE
  }

  /** The pending handoff of a shard, or null. */
  entry(shardId: number): HandoffEntry | null {
    const fromNode = this.nodes.nameOf(this.from[shardId] ?? NO_NODE)
    return fromNode === null ? null : { shardId, fromNode, generation: this.generation[shardId]! }
  }

  /** Records that `shardId` left node `fromId` at `generation` (the slot must be free). */
  record(shardId: number, fromId: number, generation: number): void {
    this.onChange(shardId)
    this.from[shardId] = fromId
    this.generation[shardId] = generation
    if (fromId >= this.pendingCount.length) this.grow(fromId)
    this.pendingCount[fromId]! += 1
    if (generation < this.lowestGeneration[fromId]!) this.lowestGeneration[fromId] = generation
  }

  /** Clears the handoff of one shard. */
  clear(shardId: number): void {
    const fromId = this.from[shardId]!
    if (fromId === NO_NODE) return
    this.onChange(shardId)
    this.from[shardId] = NO_NODE
    this.pendingCount[fromId]! -= 1
    if (this.pendingCount[fromId] === 0) this.lowestGeneration[fromId] = Infinity
  }

  /** Releases every handoff waiting for node `fromId` (it expired or was revoked); returns how many. */
  releaseNode(fromId: number): number {
    return (this.pendingCount[fromId] ?? 0) > 0 ? this.releaseWhere(fromId, Infinity) : 0
  }

  /** Releases the handoffs of `fromId` up to the generation it reports running; returns how many. */
  releaseAcknowledged(fromId: number, reportedGeneration: number): number {
    const lowest = this.lowestGeneration[fromId] ?? Infinity
    return lowest <= reportedGeneration ? this.releaseWhere(fromId, reportedGeneration) : 0
  }

  /** Every pending handoff, ordered by shard ID (O(S): for snapshots only). */
  entries(): HandoffEntry[] {
    const out: HandoffEntry[] = []
    for (let shardId = 0; shardId < this.from.length; shardId++) {
      const fromNode = this.nodes.nameOf(this.from[shardId]!)
      if (fromNode !== null) out.push({ shardId, fromNode, generation: this.generation[shardId]! })
    }
    return out
  }

  // O(S), but only when at least one entry of this node may be released.
  private releaseWhere(fromId: number, upToGeneration: number): number {
    let released = 0
    let lowest = Infinity
    for (let shardId = 0; shardId < this.from.length; shardId++) {
      if (this.from[shardId] !== fromId) continue
      const generation = this.generation[shardId]!
      if (generation <= upToGeneration) {
        this.onChange(shardId)
        this.from[shardId] = NO_NODE
        released += 1
      } else if (generation < lowest) lowest = generation
    }
    this.pendingCount[fromId]! -= released
    this.lowestGeneration[fromId] = lowest
    return released
  }

  private grow(fromId: number): void {
    const length = Math.max(fromId + 1, this.pendingCount.length * 2)
    const counts = new Int32Array(length)
    counts.set(this.pendingCount)
    const lowest = new Float64Array(length).fill(Infinity)
    lowest.set(this.lowestGeneration)
    this.pendingCount = counts
    this.lowestGeneration = lowest
  }
}
