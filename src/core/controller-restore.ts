/**
 * A controller's restore from a state saved before a restart: nodes, drains, plan, handoffs and the
 * reshard barrier. The plan is recomputed from the restored nodes (the stable planner from their stored
 * ranges too): the same fingerprint means the same mapping (no shard moves). Another total_shards, another
 * planner or another fingerprint means another mapping: a new generation, and a reshard barrier over every
 * restored node.
 */
import type { DurableState, PersistedHandoff, StateMeta } from './durable-state.js'
import type { HandoffLedger } from './handoffs.js'
import { DAILY_WINDOW_MS, IdentifyLimiter } from './identify.js'
import type { LivePlan } from './live-plan.js'
import { NO_NODE, type NodeIndex } from './node-index.js'
import { restoredNodeRecord, type NodeRecord } from './node-record.js'
import { planFingerprintInOrder } from './plan-fingerprint.js'
import { ReshardBarrier } from './reshard.js'
import type { StateTracker } from './state-tracker.js'
import type { ControllerSettings, CoreEvent } from './types.js'

/** The parts of a fresh controller a restore writes into, and the controller's steps it calls. */
export interface RestoreHost {
  readonly settings: ControllerSettings
  readonly live: Map<string, NodeRecord>
  readonly draining: Set<string>
  readonly nodes: NodeIndex
  readonly plan: LivePlan
  readonly handoffs: HandoffLedger
  readonly tracker: StateTracker
  /** The current plan generation. */
  readonly generation: number
  /** Takes over the saved generation and CRL number. */
  resume(generation: number, crlNumber: bigint | null): void
  /** The controller's re-plan: a new generation when any shard changes owner. */
  replan(): void
  /** Drops the change marks made so far (what was restored as saved is no change). */
  forgetChanges(): void
  /** Installs a reshard barrier. */
  startBarrier(barrier: ReshardBarrier): void
  /** Drops the barrier if nobody is waited for any more. */
  settleReshard(): void
  /** Adds an event for the audit log (drainEvents). */
  emit(event: CoreEvent): void
  /** Moves persistVersion: the restore must be written before the first answer. */
  markDurable(): void
  /** Whether a node may be running shards: restored live, or revoked inside its lease (restored before). */
  mayRunShards(nodeId: string): boolean
  /** The revoked nodes inside their lease (restored before). */
  revokedNames(): readonly string[]
}

/** The Identify limiter after a restart at `now`, with the saved daily grants. */
export function restoredLimiter(settings: ControllerSettings, state: DurableState, now: number): IdentifyLimiter {
  // Every bucket counts as granted at the restart: no burst of IDENTIFYs after a restart.
  // A grant stamped after `now` means the clock went back across the restart: count it as made now
  // (held a little longer) rather than drop it, which would undercount the budget.
  const grants = state.dailyGrants.map((t) => Math.min(t, now)).filter((t) => now - t < DAILY_WINDOW_MS)
  return new IdentifyLimiter(settings.maxConcurrency, settings.identifyIntervalMs, settings.dailyIdentifyLimit, now, grants)
}

/**
 * Restores `state`, saved before a restart at `now`, into a fresh controller; true when the restore is a
 * reshard (another shard count, planner or plan than the state was written with).
 */
export function restoreState(host: RestoreHost, state: DurableState, now: number): boolean {
  const { meta } = state
  host.resume(meta.generation, meta.crlNumber === null ? null : BigInt(meta.crlNumber))
  for (const nodeId of state.draining) host.draining.add(nodeId)
  for (const node of state.nodes) {
    host.live.set(node.nodeId, restoredNodeRecord(now, node))
    host.nodes.idOf(node.nodeId)
    host.plan.join(node.nodeId)
  }
  // The stable planner plans on from the stored ranges (a state from another planner or shard count has none to use).
  const plannerChanged = (meta.planner ?? 'contiguous') !== (host.settings.planner ?? 'contiguous')
  if (host.settings.planner === 'stable' && !plannerChanged && meta.totalShards === host.settings.totalShards) {
    const stored = new Map(state.nodes.map((node) => [node.nodeId, node.range]))
    host.plan.restoreRanges((nodeId) => {
      const range = stored.get(nodeId)
      return range === undefined ? undefined : { rangeStart: range[0], rangeCount: range[1] }
    })
  }
  const plan = host.plan.compute()
  const resharded =
    meta.totalShards !== host.settings.totalShards ||
    plannerChanged ||
    planFingerprintInOrder(host.plan.order, plan.starts, plan.counts) !== meta.planFingerprint
  if (!resharded) {
    host.plan.adoptRestored(plan, meta.planFingerprint)
    restoreHandoffs(host, state.handoffs)
    host.forgetChanges() // restored as saved: the marks of the restore are not changes
  } else {
    host.replan() // from an empty mapping: a new generation whenever any shard is assigned
    for (const { shardId } of state.handoffs) host.tracker.handoffs(shardId, 1) // dropped: the barrier covers them
  }
  restoreReshard(host, meta, resharded)
  return resharded
}

/** The saved handoffs that still hold under the restored (same) plan. */
function restoreHandoffs(host: RestoreHost, handoffs: readonly PersistedHandoff[]): void {
  const owners = host.plan.owners
  const revoked = new Set(host.revokedNames())
  for (const { shardId, fromNode, generation } of handoffs) {
    // Only for a previous owner that may still run it, and one entry per shard; a shard its owner waits for
    // only when a revoked holder of the name does (the name's new certificate is another process).
    if (shardId >= host.settings.totalShards || !host.mayRunShards(fromNode) || generation > host.generation) continue
    const fromId = host.nodes.idOf(fromNode)
    if ((owners[shardId] !== fromId || revoked.has(fromNode)) && host.handoffs.fromOf(shardId) === NO_NODE) host.handoffs.record(shardId, fromId, generation)
  }
}

/** Starts or continues a reshard barrier (see core/reshard.ts); audited as `reshard`. */
function restoreReshard(host: RestoreHost, meta: StateMeta, resharded: boolean): void {
  const { totalShards, maxConcurrency } = host.settings
  const concurrencyChanged = meta.maxConcurrency !== null && meta.maxConcurrency !== maxConcurrency
  let barrier: ReshardBarrier | null = null
  const holders = [...host.live.keys(), ...host.revokedNames()]
  if (resharded && holders.length > 0 && host.generation > meta.generation) {
    barrier = new ReshardBarrier(host.generation, holders)
  } else if (meta.reshard !== null) {
    barrier = new ReshardBarrier(meta.reshard.generation, meta.reshard.waitingFor.filter((id) => host.mayRunShards(id)))
  }
  if (barrier !== null) host.startBarrier(barrier)
  if (resharded || concurrencyChanged) {
    host.emit({
      kind: 'reshard',
      reason: meta.totalShards !== totalShards ? 'total_shards' : resharded ? 'planner' : 'max_concurrency',
      fromTotalShards: meta.totalShards,
      toTotalShards: totalShards,
      fromMaxConcurrency: meta.maxConcurrency,
      toMaxConcurrency: maxConcurrency,
      generation: host.generation,
      waitingFor: barrier?.waitingFor.length ?? 0,
    })
  }
  host.settleReshard()
  // Written before the first answer, or the next restart would not know the new settings and barrier.
  if (resharded || meta.maxConcurrency !== maxConcurrency || meta.reshard !== null) host.markDurable()
}
