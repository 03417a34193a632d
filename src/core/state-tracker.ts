/**
 * Remembers which parts of the durable state changed since the last delta, so a write costs what the
 * change costs: a check-in that reports a generation puts one node record, not the whole fleet.
 */
import type { PersistedHandoff, PersistedNode, StateDelta, StateMeta } from './durable-state.js'

/** How the tracker reads the current value of what it marked. */
export interface StateLookups {
  /** The persisted record of a live node, or null when it is gone. */
  node(nodeId: string): PersistedNode | null
  isDraining(nodeId: string): boolean
  handoff(shardId: number): PersistedHandoff | null
}

/** Dirty marks since the last take(). */
export class StateTracker {
  private nodes = new Set<string>()
  private draining = new Set<string>()
  // A re-plan can move tens of thousands of shards: a bitmap and a list mark them faster than a Set.
  private shardMarked = new Uint8Array(0)
  private shards: number[] = []
  private grants: number[] = []
  private dropBefore: number | null = null

  node(nodeId: string): void {
    this.nodes.add(nodeId)
  }

  drain(nodeId: string): void {
    this.draining.add(nodeId)
  }

  handoff(shardId: number): void {
    if (shardId >= this.shardMarked.length) {
      const grown = new Uint8Array(Math.max(shardId + 1, this.shardMarked.length * 2, 1024))
      grown.set(this.shardMarked)
      this.shardMarked = grown
    }
    if (this.shardMarked[shardId] === 1) return
    this.shardMarked[shardId] = 1
    this.shards.push(shardId)
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
    const putHandoffs: PersistedHandoff[] = []
    const deleteHandoffs: number[] = []
    for (const shardId of this.shards) {
      this.shardMarked[shardId] = 0
      const entry = current.handoff(shardId)
      if (entry === null) deleteHandoffs.push(shardId)
      else putHandoffs.push(entry)
    }
    const delta: StateDelta = { meta, putNodes, deleteNodes, putDraining, deleteDraining, putHandoffs, deleteHandoffs, addGrants: this.grants, dropGrantsBefore: this.dropBefore }
    this.nodes = new Set()
    this.draining = new Set()
    this.shards = []
    this.grants = []
    this.dropBefore = null
    return delta
  }
}
