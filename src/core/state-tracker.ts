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

/** Dirty marks since the last take(). */
export class StateTracker {
  private nodes = new Set<string>()
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

  /** The delta since the last take (current values of everything marked), and clears the marks. */
  take(meta: StateMeta, current: StateLookups): StateDelta {
    const putNodes: PersistedNode[] = []
    const deleteNodes: string[] = []
    for (const id of this.nodes) {
      const record = current.node(id)
      if (record === null) deleteNodes.push(id)
      else putNodes.push(record)
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
