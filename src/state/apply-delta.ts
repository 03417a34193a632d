/** Applies StateDeltas to a DurableState (the file store replays its journal with it). Pure. */
import type { DurableState, PersistedHandoff, PersistedNode, StateDelta } from '../core/durable-state.js'

const byteOrder = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/** A mutable copy of a state, cheap to apply many deltas to before turning it back into a DurableState. */
export class StateBuilder {
  private meta: DurableState['meta']
  private readonly nodes = new Map<string, PersistedNode>()
  private readonly draining = new Set<string>()
  private readonly handoffs = new Map<number, PersistedHandoff>()
  private grants: number[]

  constructor(state: DurableState) {
    this.meta = state.meta
    for (const node of state.nodes) this.nodes.set(node.nodeId, node)
    for (const id of state.draining) this.draining.add(id)
    for (const h of state.handoffs) this.handoffs.set(h.shardId, h)
    this.grants = [...state.dailyGrants]
  }

  /** Applies one delta (deletes before puts, so a delete and a put of one key in a delta leaves the put). */
  apply(delta: StateDelta): this {
    this.meta = delta.meta
    for (const id of delta.deleteNodes) this.nodes.delete(id)
    for (const node of delta.putNodes) this.nodes.set(node.nodeId, node)
    for (const id of delta.deleteDraining) this.draining.delete(id)
    for (const id of delta.putDraining) this.draining.add(id)
    for (const [first, count] of delta.deleteHandoffs) for (let s = first; s < first + count; s++) this.handoffs.delete(s)
    for (const [first, count, fromNode, generation] of delta.putHandoffs) {
      for (let shardId = first; shardId < first + count; shardId++) this.handoffs.set(shardId, { shardId, fromNode, generation })
    }
    const cutoff = delta.dropGrantsBefore
    if (cutoff !== null) this.grants = this.grants.filter((t) => t >= cutoff)
    this.grants.push(...delta.addGrants)
    return this
  }

  /** The state, in canonical order (nodes and drains by byte order, handoffs by shard, grants by time). */
  build(): DurableState {
    return {
      version: 2,
      meta: this.meta,
      nodes: [...this.nodes.values()].sort((a, b) => byteOrder(a.nodeId, b.nodeId)),
      draining: [...this.draining].sort(byteOrder),
      handoffs: [...this.handoffs.values()].sort((a, b) => a.shardId - b.shardId),
      dailyGrants: [...this.grants].sort((a, b) => a - b),
    }
  }
}

/** `state` with `deltas` applied in order. */
export function applyDeltas(state: DurableState, deltas: Iterable<StateDelta>): DurableState {
  const builder = new StateBuilder(state)
  for (const delta of deltas) builder.apply(delta)
  return builder.build()
}
