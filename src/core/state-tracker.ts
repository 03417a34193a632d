/**
 * Remembers which parts of the durable state changed since the last delta, so a write costs what the
 * change costs: a check-in that reports a generation puts one node record, not the whole fleet.
 */
import type { HandoffRun, PersistedNode, ShardRun, StateDelta, StateMeta } from './durable-state.js'

/** How the tracker reads the current value of what it marked. */
export interface StateLookups {
  /** The persisted record of a live node, or null when it is gone. */
  node(nodeId: string): PersistedNode | null
  isDraining(nodeId: string): boolean
  /** The node a shard's handoff waits for, or null when it has none. */
  handoffFrom(shardId: number): string | null
  /** The generation of a shard's pending handoff (read only when handoffFrom gave a node). */
  handoffGeneration(shardId: number): number
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

  constructor(totalShards: number) {
    this.shardMarked = new Uint8Array(totalShards)
  }
  private grants: number[] = []
  private dropBefore: number | null = null

  node(nodeId: string): void {
    this.nodes.add(nodeId)
  }

  drain(nodeId: string): void {
    this.draining.add(nodeId)
  }

  handoff(shardId: number): void {
    this.shardMarked[shardId] = 1
    if (shardId < this.lowMark) this.lowMark = shardId
    if (shardId > this.highMark) this.highMark = shardId
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
    const putHandoffs: [number, number, string, number][] = []
    const deleteHandoffs: [number, number][] = []
    let lastPut: [number, number, string, number] | undefined
    let lastDelete: [number, number] | undefined
    const marked = this.shardMarked
    for (let shardId = this.lowMark; shardId <= this.highMark; shardId++) {
      if (marked[shardId] === 0) continue
      marked[shardId] = 0
      const fromNode = current.handoffFrom(shardId)
      if (fromNode === null) {
        if (lastDelete !== undefined && lastDelete[0] + lastDelete[1] === shardId) lastDelete[1] += 1
        else deleteHandoffs.push((lastDelete = [shardId, 1]))
        continue
      }
      const generation = current.handoffGeneration(shardId)
      if (lastPut !== undefined && lastPut[0] + lastPut[1] === shardId && lastPut[2] === fromNode && lastPut[3] === generation) lastPut[1] += 1
      else putHandoffs.push((lastPut = [shardId, 1, fromNode, generation]))
    }
    this.lowMark = Infinity
    this.highMark = -1
    return { putHandoffs, deleteHandoffs }
  }
}
