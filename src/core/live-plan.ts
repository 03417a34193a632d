/**
 * The controller's kept plan: every live node (draining ones included) in byte order of node IDs, with its
 * record, its NodeIndex ID and its range as parallel arrays, and the shard → owner table. The order is kept
 * between re-plans and only merged with the nodes that joined or left since, so a re-plan at N = 10,000
 * sorts nothing.
 */
import { NO_NODE, type NodeIndex } from './node-index.js'
import type { NodeRecord } from './node-record.js'
import { PlanFingerprinter, planFingerprintInOrder } from './plan-fingerprint.js'
import { compareBytes, planContiguous, type OrderedPlan, type Planner } from './planner.js'
import { ownersInOrder, sameRanges } from './shard-map.js'
import type { NodeRange } from './types.js'

const EMPTY_RANGE: NodeRange = { rangeStart: 0, rangeCount: 0 }

/** A plan computed over the current order, not adopted yet (see LivePlan.next and adopt). */
export interface NextPlan {
  readonly plan: OrderedPlan
  /** The owner table of `plan`, written into the spare table. */
  readonly owners: Int32Array
  /** False when every node keeps its place and range (the fingerprint stays). */
  readonly rangesChanged: boolean
}

/** The plan over the live set in its kept byte order, with the owner table derived from it. */
export class LivePlan {
  private orderNames: string[] = []
  private orderRecords: NodeRecord[] = []
  private orderIds: Int32Array = new Int32Array(0)
  private rangeStarts: Int32Array = new Int32Array(0)
  private rangeCounts: Int32Array = new Int32Array(0)
  /** 1 per position of a node that joined since the current plan (read by the planner). */
  private freshFlags: Uint8Array = new Uint8Array(0)
  /** Position in the order per NodeIndex ID (valid only where orderNames[position] is that node). */
  private positionById: Int32Array = new Int32Array(0)
  /** Nodes that joined since the order was last rebuilt. */
  private joined: string[] = []
  /** Nodes dropped since the last adopted plan; their IDs are freed once the old mapping is gone. */
  private dropped: string[] = []
  private orderStale = false
  private planFingerprint = planFingerprintInOrder([], [], [])
  private readonly fingerprinter = new PlanFingerprinter()
  /** Owner ID per shard (NO_NODE: unassigned). */
  private ownerTable: Int32Array
  /** The previous owner table, overwritten by the next re-plan. */
  private spareOwners: Int32Array
  private unassignedCount: number
  /** Names whose IDs adopt() keeps although they left (a revoked node's handoffs may still name it). */
  retainsId: (nodeId: string) => boolean = () => false

  /** An empty plan over `totalShards`; `live` and `draining` are the controller's own (read, never written). */
  constructor(
    private readonly totalShards: number,
    private readonly nodes: NodeIndex,
    private readonly live: ReadonlyMap<string, NodeRecord>,
    private readonly draining: ReadonlySet<string>,
    private readonly planner: Planner = planContiguous,
    /** True when the ranges are persisted with the node records (the stable planner). */
    readonly persistsRanges = false,
    /**
     * Whether adopt() frees the IDs of nodes that left. A reshard's next set shares the NodeIndex and
     * never does: only the current plan frees them, once both sets adopted the re-plan that dropped them.
     */
    public releasesIds = true,
  ) {
    this.ownerTable = new Int32Array(totalShards).fill(NO_NODE)
    this.spareOwners = new Int32Array(totalShards)
    this.unassignedCount = totalShards
  }

  /** Node IDs in byte order (a new array whenever nodes joined or left: never changed in place). */
  get order(): readonly string[] {
    return this.orderNames
  }

  /** The records of `order`, position by position. */
  get records(): readonly NodeRecord[] {
    return this.orderRecords
  }

  /** NodeIndex IDs of `order`, position by position. */
  get ids(): Int32Array {
    return this.orderIds
  }

  /** Owner ID per shard (NO_NODE: unassigned). */
  get owners(): Int32Array {
    return this.ownerTable
  }

  /** Shards the current plan leaves unassigned. */
  get unassigned(): number {
    return this.unassignedCount
  }

  /** The fingerprint of the current plan (persisted). */
  get fingerprint(): string {
    return this.planFingerprint
  }

  /** A node joined: it is merged into the order at the next plan. */
  join(nodeId: string): void {
    this.joined.push(nodeId)
    this.orderStale = true
  }

  /** A node left the live set: it leaves the order at the next plan, and its ID is freed after. */
  leave(nodeId: string): void {
    this.dropped.push(nodeId)
    this.orderStale = true
  }

  /** The range of the node at a position of `order`. */
  rangeAt(at: number): NodeRange {
    return { rangeStart: this.rangeStarts[at]!, rangeCount: this.rangeCounts[at]! }
  }

  /** The range of a node in the current plan (empty when it has none). */
  rangeOf(nodeId: string): NodeRange {
    const at = this.positionOf(nodeId)
    return at < 0 ? EMPTY_RANGE : this.rangeAt(at)
  }

  /**
   * Takes the ranges a restore read back as the current plan (before compute()); a node without one counts
   * as joined. The planner checks them: ranges that do not fit are not used.
   */
  restoreRanges(rangeOf: (nodeId: string) => NodeRange | undefined): void {
    if (this.orderStale) this.rebuildOrder()
    this.orderNames.forEach((nodeId, at) => {
      const range = rangeOf(nodeId)
      if (range === undefined) return
      this.rangeStarts[at] = range.rangeStart
      this.rangeCounts[at] = range.rangeCount
      this.freshFlags[at] = 0
    })
  }

  /** Nodes whose range `next` changes (their persisted range must be written). */
  changedNodes(next: NextPlan): string[] {
    const changed: string[] = []
    const { starts, counts } = next.plan
    for (let at = 0; at < this.orderNames.length; at++) {
      if (starts[at] !== this.rangeStarts[at] || counts[at] !== this.rangeCounts[at]) changed.push(this.orderNames[at]!)
    }
    return changed
  }

  /** The planner over the live set in its kept byte order (rebuilt first if nodes joined or left). */
  compute(): OrderedPlan {
    if (this.orderStale) this.rebuildOrder()
    const records = this.orderRecords
    const capacities = new Int32Array(records.length)
    for (let i = 0; i < records.length; i++) capacities[i] = records[i]!.capacity
    const draining = new Uint8Array(records.length)
    for (const nodeId of this.draining) {
      const at = this.positionOf(nodeId)
      if (at >= 0) draining[at] = 1
    }
    return this.planner({
      totalShards: this.totalShards,
      capacities,
      draining,
      currentStarts: this.rangeStarts,
      currentCounts: this.rangeCounts,
      fresh: this.freshFlags,
    })
  }

  /** The next plan and its owner table, compared with the current ranges; adopt() makes it current. */
  next(): NextPlan {
    const before = { order: this.orderNames, starts: this.rangeStarts, counts: this.rangeCounts }
    const plan = this.compute()
    const rangesChanged = !sameRanges(before, { order: this.orderNames, starts: plan.starts, counts: plan.counts })
    const owners = ownersInOrder(this.orderIds, plan.starts, plan.counts, this.totalShards, this.spareOwners)
    return { plan, owners, rangesChanged }
  }

  /** Makes `next` the current plan; the replaced owner table becomes the spare one. */
  adopt(next: NextPlan): void {
    const { plan, owners } = next
    if (next.rangesChanged) this.planFingerprint = this.fingerprinter.fingerprint(this.orderNames, plan.starts, plan.counts)
    this.rangeStarts = plan.starts
    this.rangeCounts = plan.counts
    this.freshFlags = new Uint8Array(plan.counts.length)
    this.spareOwners = this.ownerTable
    this.ownerTable = owners
    this.unassignedCount = this.totalShards - plan.assigned
    // A dropped node that checked in again since keeps its ID (it is live and in the new order).
    if (this.releasesIds) for (const nodeId of this.dropped) if (!this.live.has(nodeId) && !this.retainsId(nodeId)) this.nodes.release(nodeId)
    this.dropped = []
  }

  /** Adopts a plan computed from restored nodes as the saved one, under its saved fingerprint. */
  adoptRestored(plan: OrderedPlan, fingerprint: string): void {
    this.rangeStarts = plan.starts
    this.rangeCounts = plan.counts
    this.freshFlags = new Uint8Array(plan.counts.length)
    this.planFingerprint = fingerprint
    this.ownerTable = ownersInOrder(this.orderIds, plan.starts, plan.counts, this.totalShards)
    this.unassignedCount = this.totalShards - plan.assigned
  }

  /** Where a node stands in `order` (-1: not in it). */
  private positionOf(nodeId: string): number {
    const id = this.nodes.find(nodeId)
    const at = id === undefined ? -1 : (this.positionById[id] ?? -1)
    return at >= 0 && this.orderNames[at] === nodeId ? at : -1
  }

  /**
   * Brings the order up to date with the live set in one merge pass: nodes that left are skipped, those
   * that joined (sorted among themselves) are merged in. O(N + J log J) with no lookup per kept node, so one
   * join at N = 10,000 costs array copies, not 10,000 map lookups. A node that left and came back since
   * is removed and merged in again (its record is a new one).
   */
  private rebuildOrder(): void {
    const oldOrder = this.orderNames
    const oldRecords = this.orderRecords
    const oldIds = this.orderIds
    const placedAt = (nodeId: string) => this.positionOf(nodeId) // in the old order: replaced only at the end
    const removed = new Uint8Array(oldOrder.length)
    for (const nodeId of this.dropped) {
      const at = placedAt(nodeId)
      if (at >= 0) removed[at] = 1
    }
    const fresh = [...new Set([...this.joined, ...this.dropped])]
      .filter((nodeId) => this.live.has(nodeId) && (placedAt(nodeId) < 0 || removed[placedAt(nodeId)] === 1))
      .sort(compareBytes)
    const oldStarts = this.rangeStarts
    const oldCounts = this.rangeCounts
    const oldFresh = this.freshFlags
    let kept = 0
    for (let i = 0; i < oldOrder.length; i++) if (removed[i] !== 1) kept += 1
    const size = kept + fresh.length
    const order: string[] = []
    const records: NodeRecord[] = []
    // Typed arrays of the final size, written in place: pushing numbers and converting cost ~1 ms a join at N = 10,000.
    const ids = new Int32Array(size)
    // The current ranges follow their nodes into the new order (what the planner plans from).
    const starts = new Int32Array(size)
    const counts = new Int32Array(size)
    const joinedFlags = new Uint8Array(size)
    let at = 0
    let j = 0
    for (let i = 0; i <= oldOrder.length; i++) {
      const next = i < oldOrder.length ? oldOrder[i]! : null
      while (j < fresh.length && (next === null || fresh[j]! < next)) {
        const nodeId = fresh[j++]!
        order.push(nodeId)
        records.push(this.live.get(nodeId)!)
        ids[at] = this.nodes.idOf(nodeId)
        joinedFlags[at] = 1 // starts and counts stay 0
        at += 1
      }
      if (next === null || removed[i] === 1) continue
      order.push(next)
      records.push(oldRecords[i]!)
      ids[at] = oldIds[i]!
      starts[at] = oldStarts[i] ?? 0
      counts[at] = oldCounts[i] ?? 0
      joinedFlags[at] = oldFresh[i] ?? 0
      at += 1
    }
    this.orderNames = order
    this.orderRecords = records
    this.orderIds = ids
    this.rangeStarts = starts
    this.rangeCounts = counts
    this.freshFlags = joinedFlags
    const positions = new Int32Array(this.nodes.size).fill(-1)
    for (let k = 0; k < size; k++) positions[ids[k]!] = k
    this.positionById = positions
    this.joined = []
    this.orderStale = false
  }
}
