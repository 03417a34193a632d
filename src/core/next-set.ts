/**
 * A live reshard's next shard set (SPEC "Live resharding"): the same planner over the same live nodes
 * with N shards, planned beside the current set. Its shards are identified while the current set still
 * serves (Discord allows sessions with different shard counts at once), and the controller switches to it
 * once every one of them is reported running.
 *
 * Readiness is what the nodes report (`next_ready_shards`), counted only from a check-in that runs the
 * plan in which the next set last changed: a count reported against an older next range says nothing
 * about the shards of the current one.
 */
import { HandoffLedger } from './handoffs.js'
import type { HandoffRun } from './durable-state.js'
import { LivePlan } from './live-plan.js'
import type { NodeIndex } from './node-index.js'
import type { NodeRecord } from './node-record.js'
import type { Planner } from './planner.js'
import type { NodeRange } from './types.js'

/** What the next set remembers of a node's readiness (memory only: nodes report it every check-in). */
interface Readiness {
  readonly readyShards: number
  readonly generation: number
}

/** The next set of a reshard in progress. */
export class NextSet {
  readonly plan: LivePlan
  readonly handoffs: HandoffLedger
  /** The generation of the last plan that changed the next set (its start included). */
  changedAt: number
  private readonly readiness = new Map<string, Readiness>()
  /** The sum of readyOf over the nodes that reported: kept as they report, recounted after a re-plan. */
  private readySum = 0

  constructor(
    /** N: the shard count the reshard goes to. */
    readonly totalShards: number,
    /** The current set's shard count when the reshard started. */
    readonly fromTotalShards: number,
    /** The generation whose plans first carried this next set. */
    readonly startedAt: number,
    nodes: NodeIndex,
    live: ReadonlyMap<string, NodeRecord>,
    draining: ReadonlySet<string>,
    planner: Planner,
    stable: boolean,
    onHandoffChange: () => void,
  ) {
    // Never releases node IDs: the current plan does, after both sets adopted a re-plan (see Controller.replan).
    this.plan = new LivePlan(totalShards, nodes, live, draining, planner, stable, false)
    this.handoffs = new HandoffLedger(totalShards, nodes, onHandoffChange)
    this.changedAt = startedAt
    for (const nodeId of live.keys()) this.plan.join(nodeId)
  }

  /** A node's check-in reported `readyShards` next-set shards running while it ran `generation`. */
  report(nodeId: string, readyShards: number | undefined, generation: number | undefined): void {
    if (readyShards === undefined || generation === undefined) return
    this.readySum -= this.readyOf(nodeId)
    this.readiness.set(nodeId, { readyShards, generation })
    this.readySum += this.readyOf(nodeId)
  }

  /** A node left the live set: what it reported goes with it. */
  forget(nodeId: string): void {
    this.readySum -= this.readyOf(nodeId)
    this.readiness.delete(nodeId)
  }

  /** After a re-plan (ranges may have changed; `changedAt` set by the caller): the sum counted again. O(N). */
  recount(): void {
    let total = 0
    for (const nodeId of this.readiness.keys()) total += this.readyOf(nodeId)
    this.readySum = total
  }

  /** The next-set shards a node reported running for the next set as it stands now (0 when unknown). */
  readyOf(nodeId: string): number {
    const seen = this.readiness.get(nodeId)
    if (seen === undefined || seen.generation < this.changedAt) return 0
    return Math.min(seen.readyShards, this.plan.rangeOf(nodeId).rangeCount)
  }

  /** Next-set shards reported running by their owners in the next set as it stands. */
  get readyTotal(): number {
    return this.readySum
  }

  /**
   * True when every next-set shard is assigned, released by any previous owner, and reported running by
   * its owner: the controller may switch. O(1) until the count is complete (checked on every check-in).
   */
  complete(): boolean {
    return this.readySum >= this.totalShards && this.plan.unassigned === 0 && this.handoffs.pendingTotal() === 0
  }

  /** The range of a node in the next set. */
  rangeOf(nodeId: string): NodeRange {
    return this.plan.rangeOf(nodeId)
  }

  /** The pending next-set handoffs as runs (a shard range per previous owner and generation), for the state. */
  handoffRuns(nameOf: (id: number) => string | null): HandoffRun[] {
    const { from, generation } = this.handoffs.tables
    const runs: HandoffRun[] = []
    let shardId = 0
    while (shardId < from.length) {
      const fromId = from[shardId]!
      const name = nameOf(fromId)
      if (name === null) {
        shardId += 1
        continue
      }
      const first = shardId
      const g = generation[shardId]!
      while (shardId < from.length && from[shardId] === fromId && generation[shardId] === g) shardId += 1
      runs.push([first, shardId - first, name, g])
    }
    return runs
  }
}
