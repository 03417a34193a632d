/**
 * Remembers which parts of the durable state changed since the last delta, so a write costs what the
 * change costs: a check-in that reports a generation puts one node record, not the whole fleet.
 */
import { NO_NODE } from './node-index.js'

const MAX_SHARDS = 65_536
import type { HandoffRun, PersistedNode, ShardRun, StateDelta, StateMeta } from './durable-state.js'

/** How the tracker reads the current value of what it marked. */
export interface StateLookups {
  /** The persisted record of a live node, or null when it is gone. */
  node(nodeId: string): PersistedNode | null
  isDraining(nodeId: string): boolean
  /** Per shard: the ID of the node its handoff waits for (NO_NODE: none) and that handoff's generation. */
  readonly handoffFrom: Int32Array
  readonly handoffGeneration: Float64Array
  /** The name behind a node ID of `handoffFrom`. */
  nodeName(id: number): string
}

/**
 * Dirty marks since the last take(). A node record whose only change is the generation its node reported
 * is a *report*: no answer, plan or grant depends on it being durable (the restore reads no reported
 * generation to decide anything; releases are handoff keys of their own, written eagerly), so it is kept
 * apart and written in the background, a bounded number per write (durable-writer.ts). While shards move,
 * every check-in reports a newer generation: written with the changes they travelled with, 10,000 nodes'
 * reports made single etcd writes of 5,593 node records (0.6 s), and an operator's drain queued behind them.
 */
export class StateTracker {
  private nodes = new Set<string>()
  /** Nodes whose record changed in its reported generation only (not also in `nodes`). */
  private reports = new Set<string>()
  private draining = new Set<string>()
  // A re-plan can move tens of thousands of shards: a bitmap over all shards and the span of the marks
  // cost a store per mark (a Set, or even a list, cost more than the re-plan itself at S = 65,536).
  private readonly shardMarked: Uint8Array
  private lowMark = Infinity
  private highMark = -1

  /**
   * Marks for every shard ID a state can hold (SPEC's limit, 65,536), not only this run's total_shards:
   * a restart with fewer shards must still delete the saved handoffs of shards beyond the new total.
   */
  constructor() {
    this.shardMarked = new Uint8Array(MAX_SHARDS)
  }
  private grants: number[] = []
  private dropBefore: number | null = null

  node(nodeId: string): void {
    this.nodes.add(nodeId)
    this.reports.delete(nodeId)
  }

  /** The node's record changed in its reported generation only (see the class comment). */
  report(nodeId: string): void {
    if (!this.nodes.has(nodeId)) this.reports.add(nodeId)
  }

  /** Reports marked and not yet taken. */
  get pendingReports(): number {
    return this.reports.size
  }

  drain(nodeId: string): void {
    this.draining.add(nodeId)
  }

  /** Marks the handoffs of shards first .. first + count - 1 as changed. */
  handoffs(first: number, count: number): void {
    this.shardMarked.fill(1, first, first + count)
    if (first < this.lowMark) this.lowMark = first
    if (first + count - 1 > this.highMark) this.highMark = first + count - 1
  }

  /** A grant counted against the daily budget; grants before `dropBefore` left the window. */
  grant(at: number, dropBefore: number): void {
    this.grants.push(at)
    this.dropBefore = dropBefore
  }

  /**
   * The delta since the last take (current values of everything marked), and clears the marks; of the
   * reports, the oldest `reportLimit` only (the rest stay marked for a later take).
   */
  take(meta: StateMeta, current: StateLookups, reportLimit = Number.POSITIVE_INFINITY): StateDelta {
    const putNodes: PersistedNode[] = []
    const deleteNodes: string[] = []
    const take = (id: string) => {
      const record = current.node(id)
      if (record === null) deleteNodes.push(id)
      else putNodes.push(record)
    }
    for (const id of this.nodes) take(id)
    if (reportLimit >= this.reports.size) {
      for (const id of this.reports) take(id)
      this.reports = new Set()
    } else {
      let left = reportLimit
      for (const id of this.reports) {
        if (left <= 0) break
        left -= 1
        take(id)
        this.reports.delete(id) // deleting the entry being visited is safe in a Set iteration
      }
    }
    const putDraining: string[] = []
    const deleteDraining: string[] = []
    for (const id of this.draining) (current.isDraining(id) ? putDraining : deleteDraining).push(id)
    const { putHandoffs, deleteHandoffs } = this.takeHandoffRuns(current)
    const delta: StateDelta = { meta, putNodes, deleteNodes, putDraining, deleteDraining, putHandoffs, deleteHandoffs, addGrants: this.grants, dropGrantsBefore: this.dropBefore }
    this.nodes = new Set()
    this.draining = new Set()
    this.grants = []
    this.dropBefore = null
    return delta
  }

  /** The marked shards as runs in shard order (a scan of the span of the marks), and clears the marks. */
  private takeHandoffRuns(current: StateLookups): { putHandoffs: HandoffRun[]; deleteHandoffs: ShardRun[] } {
    const putHandoffs: HandoffRun[] = []
    const deleteHandoffs: ShardRun[] = []
    const marked = this.shardMarked
    const { handoffFrom, handoffGeneration } = current
    const end = this.highMark + 1
    let shardId = this.lowMark
    while (shardId < end) {
      if (marked[shardId] === 0) {
        shardId += 1
        continue
      }
      // A run: marked shards in a row with the same handoff (or all released).
      const first = shardId
      // (beyond this run's total_shards the tables end: those shards have no handoff)
      const fromId = handoffFrom[first] ?? NO_NODE
      const generation = handoffGeneration[first] ?? 0
      marked[shardId++] = 0
      while (shardId < end && marked[shardId] === 1 && (handoffFrom[shardId] ?? NO_NODE) === fromId && (fromId === NO_NODE || handoffGeneration[shardId] === generation)) {
        marked[shardId++] = 0
      }
      if (fromId === NO_NODE) deleteHandoffs.push([first, shardId - first])
      else putHandoffs.push([first, shardId - first, current.nodeName(fromId), generation])
    }
    this.lowMark = Infinity
    this.highMark = -1
    return { putHandoffs, deleteHandoffs }
  }
}
