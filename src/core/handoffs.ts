/**
 * Pending handoffs (SPEC "Handoff safety"): a shard taken from a live node A at generation g stays
 * closed to its new owner until A acknowledges g, expires, or is revoked.
 */
import type { PersistedHandoff } from './durable-state.js'
import { NO_NODE, type NodeIndex } from './node-index.js'

/**
 * One slot per shard (so never more than S entries) in typed arrays: a re-plan that moves every
 * shard costs a few nanoseconds per shard. Per node, a count and the lowest pending generation
 * tell whether a release has anything to do, so a check-in of a node with nothing to release
 * never looks at a shard; and a list of the shards recorded for it, so that a release looks only at
 * those. (A scan of all S shards per release made every check-in after a fleet-wide re-plan cost
 * O(S): at N = 10,000 and S = 65,536 it was a fifth of the controller's CPU in the fleet benchmark.)
 */
export class HandoffLedger {
  private readonly from: Int32Array
  private readonly generation: Float64Array
  /** Per node ID: how many shards wait for it, and a lower bound of their generations (exact after a scan). */
  private pendingCount = new Int32Array(64)
  private lowestGeneration = new Float64Array(64).fill(Infinity)
  /**
   * Per node ID: the shards recorded for it. Entries go stale when a shard is cleared or recorded for
   * another node (the slot in `from` is the truth); a release keeps only the live ones.
   */
  private shardsOf: number[][] = []
  /** Marks a shard already kept during one release (a shard can be listed twice for a node). */
  private readonly keptIn: Uint32Array
  private pass = 0

  /** @param onChange told of every run of shards whose handoff entries were set or cleared (persistence tracking) */
  constructor(
    totalShards: number,
    private readonly nodes: NodeIndex,
    private readonly onChange: (first: number, count: number) => void = () => undefined,
  ) {
    this.from = new Int32Array(totalShards).fill(NO_NODE)
    this.generation = new Float64Array(totalShards)
    this.keptIn = new Uint32Array(totalShards)
  }

  /** The node ID a shard waits for, or NO_NODE. */
  fromOf(shardId: number): number {
    return this.from[shardId] ?? NO_NODE
  }

  /** The generation at which `shardId` left the node it waits for (meaningful only while fromOf is a node). */
  generationOf(shardId: number): number {
    return this.generation[shardId] ?? 0
  }

  /** Per shard, the node ID its handoff waits for and the generation (read-only views, for persistence). */
  get tables(): { readonly from: Int32Array; readonly generation: Float64Array } {
    return { from: this.from, generation: this.generation }
  }

  /** How many shards wait for node `fromId` to release them. */
  pendingFor(fromId: number): number {
    return this.pendingCount[fromId] ?? 0
  }

  /** How many shards wait for a release (O(node IDs): for the operator's view, not the hot path). */
  pendingTotal(): number {
    let total = 0
    for (const count of this.pendingCount) total += count
    return total
  }

  /** Records that `shardId` left node `fromId` at `generation` (the slot must be free). */
  record(shardId: number, fromId: number, generation: number): void {
    this.recordRun(shardId, 1, fromId, generation)
  }

  /**
   * Records that shards first .. first + count - 1 left node `fromId` at `generation` (their slots must be
   * free). A re-plan moves shards in contiguous runs per node: one call per run, not per shard.
   */
  recordRun(first: number, count: number, fromId: number, generation: number): void {
    const end = first + count
    this.onChange(first, count)
    this.from.fill(fromId, first, end)
    this.generation.fill(generation, first, end)
    if (fromId >= this.pendingCount.length) this.grow(fromId)
    this.pendingCount[fromId]! += count
    if (generation < this.lowestGeneration[fromId]!) this.lowestGeneration[fromId] = generation
    const listed = (this.shardsOf[fromId] ??= [])
    for (let shardId = first; shardId < end; shardId++) listed.push(shardId)
    // stale entries (cleared, or moved on to another node) are dropped before they can pile up
    if (listed.length > 2 * this.pendingCount[fromId]! + 64) this.shardsOf[fromId] = this.liveShardsOf(fromId, listed)
  }

  /**
   * Records the handoffs of a re-plan from owner table `previous` to `owners` (SPEC "Handoff safety"): a
   * shard taken from a live node (ID in `liveIds`) waits for it at `generation`, in runs of such shards;
   * a shard moved back to the node it waited for is open again. True when any shard changed owner (the
   * caller's generation becomes `generation`).
   */
  recordMoves(previous: Int32Array, owners: Int32Array, liveIds: Int32Array, generation: number, revokedIds: readonly number[] = []): boolean {
    // 1: live; 2: a revoked node inside its lease (it may still run what it had: see core/revoked-holders.ts)
    const isLive = new Uint8Array(this.nodes.size)
    for (const id of liveIds) isLive[id] = 1
    for (const id of revokedIds) isLive[id] = 2
    const fromOf = this.from
    const totalShards = owners.length
    let moved = false
    let shardId = 0
    while (shardId < totalShards) {
      const from = previous[shardId]!
      const to = owners[shardId]!
      if (from === to) {
        shardId += 1
        continue
      }
      moved = true
      const waitsFor = fromOf[shardId]!
      if (waitsFor !== NO_NODE) {
        // Back to the node it waits for: nobody else can have identified it. Elsewhere: keep the original.
        // Not to a name whose revoked holder waits: the name's new certificate is another process.
        if (waitsFor === to && isLive[to] !== 2) this.clear(shardId)
        shardId += 1
      } else if (from !== NO_NODE && isLive[from] !== 0) {
        // Taken from a live node: the run of such shards from `from` to `to`.
        const first = shardId++
        while (shardId < totalShards && previous[shardId] === from && owners[shardId] === to && fromOf[shardId] === NO_NODE) shardId += 1
        this.recordRun(first, shardId - first, from, generation)
      } else {
        shardId += 1
      }
    }
    return moved
  }

  /** Clears the handoff of one shard. */
  clear(shardId: number): void {
    const fromId = this.from[shardId]!
    if (fromId === NO_NODE) return
    this.onChange(shardId, 1)
    this.from[shardId] = NO_NODE
    this.pendingCount[fromId]! -= 1
    if (this.pendingCount[fromId] === 0) {
      this.lowestGeneration[fromId] = Infinity
      this.shardsOf[fromId] = []
    }
  }

  /** Releases every handoff waiting for node `fromId` (it expired or was revoked); returns how many. */
  releaseNode(fromId: number): number {
    return (this.pendingCount[fromId] ?? 0) > 0 ? this.releaseWhere(fromId, Infinity) : 0
  }

  /**
   * Releases the handoffs of `fromId` up to the generation it reports running; returns how many. Those at or
   * below `above` stay: they wait for a revoked holder of the name, for which no check-in speaks.
   */
  releaseAcknowledged(fromId: number, reportedGeneration: number, above = -Infinity): number {
    const lowest = this.lowestGeneration[fromId] ?? Infinity
    if (lowest > reportedGeneration) return 0
    return this.releaseWhere(fromId, reportedGeneration, above)
  }

  /**
   * How long an Identify of `shardId` waits for the node it was taken from: until that node's lease runs
   * out (it may acknowledge earlier); null when it waits for nobody. `leaseFrom` gives the instant a
   * holder's lease counts from (a live node's or a revoked one's last check-in), or undefined.
   */
  waitMs(shardId: number, leaseFrom: (nodeId: string) => number | undefined, leaseMs: number, now: number): number | null {
    const waitsFor = this.nodes.nameOf(this.fromOf(shardId))
    const lastSeen = waitsFor === null ? undefined : leaseFrom(waitsFor)
    // The first instant at which the previous owner counts as expired (now - lastSeen > lease).
    return lastSeen === undefined ? null : lastSeen + leaseMs + 1 - now
  }

  /** Every pending handoff, ordered by shard ID (O(S): for snapshots only). */
  entries(): PersistedHandoff[] {
    const out: PersistedHandoff[] = []
    for (let shardId = 0; shardId < this.from.length; shardId++) {
      const fromNode = this.nodes.nameOf(this.from[shardId]!)
      if (fromNode !== null) out.push({ shardId, fromNode, generation: this.generation[shardId]! })
    }
    return out
  }

  // O(shards listed for this node), and only when at least one of them may be released.
  private releaseWhere(fromId: number, upToGeneration: number, above = -Infinity): number {
    const listed = this.shardsOf[fromId] ?? []
    const kept: number[] = []
    const pass = this.nextPass()
    let released = 0
    let lowest = Infinity
    for (const shardId of listed) {
      if (this.from[shardId] !== fromId || this.keptIn[shardId] === pass) continue
      const generation = this.generation[shardId]!
      if (generation <= upToGeneration && generation > above) {
        this.onChange(shardId, 1)
        this.from[shardId] = NO_NODE
        released += 1
      } else {
        this.keptIn[shardId] = pass
        kept.push(shardId)
        if (generation < lowest) lowest = generation
      }
    }
    this.shardsOf[fromId] = kept
    this.pendingCount[fromId]! -= released
    this.lowestGeneration[fromId] = lowest
    return released
  }

  /** The shards of `listed` that still wait for `fromId`, each once. */
  private liveShardsOf(fromId: number, listed: readonly number[]): number[] {
    const pass = this.nextPass()
    const live: number[] = []
    for (const shardId of listed) {
      if (this.from[shardId] !== fromId || this.keptIn[shardId] === pass) continue
      this.keptIn[shardId] = pass
      live.push(shardId)
    }
    return live
  }

  private nextPass(): number {
    this.pass = (this.pass + 1) >>> 0 || 1 // 0 is the arrays' initial value: never a pass
    return this.pass
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
