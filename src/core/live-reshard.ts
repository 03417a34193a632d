/**
 * The rules around a live reshard (SPEC "Live resharding") that are not the next set itself: which shard
 * counts may be started, what survives a restart, and the settings a restart runs with after a switch.
 */
import { AppError } from '../errors.js'
import type { PersistedLiveReshard, StateMeta } from './durable-state.js'
import type { NextSet } from './next-set.js'
import { NO_NODE, type NodeIndex } from './node-index.js'
import { planFingerprintInOrder } from './plan-fingerprint.js'
import type { ControllerSettings } from './types.js'

/** What a reshard request is checked against besides the settings. */
export interface ReshardContext {
  /** The next set's shard count of a live reshard in progress, or null. */
  readonly live: number | null
  /** True while a restart barrier (a restart with another shard count) is in force. */
  readonly barrier: boolean
  /** Grants left in the daily Identify budget, or null without one. */
  readonly remainingBudget: number | null
  /** Live nodes whose agent has not shown that it runs a next set (byte order), at most a few. */
  readonly outdated: readonly string[]
}

/** Throws the SPEC's refusal for a reshard to `totalShards` that may not start now. */
export function assertReshardAllowed(settings: ControllerSettings, totalShards: number, context: ReshardContext): void {
  if (!Number.isInteger(totalShards) || totalShards < 1 || totalShards > 65_536) {
    throw new AppError('invalid_request', 'total_shards must be an integer in 1..65536')
  }
  const { maxConcurrency } = settings
  if (maxConcurrency > 1 && totalShards % maxConcurrency !== 0) {
    throw new AppError('invalid_request', `total_shards (${totalShards}) must be a multiple of max_concurrency (${maxConcurrency})`)
  }
  if (context.live !== null) throw new AppError('reshard_in_progress', `a reshard to ${context.live} shards is in progress (abort it first)`)
  if (context.barrier) throw new AppError('reshard_in_progress', 'a restart with another total_shards still waits for nodes to apply the new plan')
  if (totalShards === settings.totalShards) throw new AppError('invalid_request', `the deployment already runs ${totalShards} shards`)
  if (context.outdated.length > 0) {
    throw new AppError(
      'agents_outdated',
      `${context.outdated.length === 1 ? 'node' : 'nodes'} ${context.outdated.slice(0, 3).join(', ')}${context.outdated.length > 3 ? ' and more' : ''} ` +
        'sent no next_ready_shards since the last restart: an agent without live resharding refuses plans with a next set (upgrade it, or wait for its next check-in)',
    )
  }
  if (context.remainingBudget !== null && context.remainingBudget < totalShards) {
    throw new AppError(
      'budget_insufficient',
      `the daily Identify budget has ${context.remainingBudget} grants left; a reshard to ${totalShards} shards needs ${totalShards}`,
    )
  }
}

/**
 * The settings a controller runs with: the configured ones, except that a live reshard's switch recorded
 * in the state keeps its shard count while the configuration still names the count it switched from
 * (an operator who has not edited the file yet must not be resharded back by a restart).
 */
export function effectiveSettings(configured: ControllerSettings, meta: StateMeta | undefined): ControllerSettings {
  if (meta?.configuredTotalShards === undefined || meta.configuredTotalShards !== configured.totalShards) return configured
  if (configured.maxConcurrency > 1 && meta.totalShards % configured.maxConcurrency !== 0) return configured
  return { ...configured, totalShards: meta.totalShards }
}

/** The next set as the state keeps it. */
export function persistedLiveReshard(next: NextSet, nodes: NodeIndex): PersistedLiveReshard {
  const base = {
    fromTotalShards: next.fromTotalShards,
    toTotalShards: next.totalShards,
    startedAt: next.startedAt,
    changedAt: next.changedAt,
    handoffs: next.handoffRuns((id) => nodes.nameOf(id)),
  }
  if (!next.plan.persistsRanges) return base
  const ranges: [string, number, number][] = []
  next.plan.records.forEach((record, at) => {
    const range = next.plan.rangeAt(at)
    if (range.rangeCount > 0) ranges.push([record.nodeId, range.rangeStart, range.rangeCount])
  })
  return { ...base, ranges }
}

/**
 * Restores a live reshard's next set over the restored nodes: the stable planner from its stored ranges,
 * the contiguous one recomputed (the same live set gives the same ranges); then the handoffs that still hold
 * (those waiting for a node that may still run its shards: live, or revoked inside its lease).
 */
export function restoreLiveReshard(
  next: NextSet,
  saved: PersistedLiveReshard,
  holders: { readonly mayRunShards: (nodeId: string) => boolean; readonly isRevoked: (nodeId: string) => boolean },
  nodes: NodeIndex,
  generation: number,
): void {
  if (saved.ranges !== undefined) {
    const stored = new Map(saved.ranges.map(([nodeId, rangeStart, rangeCount]) => [nodeId, { rangeStart, rangeCount }]))
    next.plan.restoreRanges((nodeId) => stored.get(nodeId) ?? { rangeStart: 0, rangeCount: 0 })
  }
  const plan = next.plan.compute()
  // adopted with its own fingerprint: it becomes the persisted plan at the switch
  next.plan.adoptRestored(plan, planFingerprintInOrder(next.plan.order, plan.starts, plan.counts))
  next.changedAt = Math.min(saved.changedAt, generation)
  const owners = next.plan.owners
  for (const [first, count, fromNode, atGeneration] of saved.handoffs) {
    if (!holders.mayRunShards(fromNode) || atGeneration > generation) continue
    const fromId = nodes.idOf(fromNode)
    // a shard its owner waits for only when a revoked holder of the name does (another process)
    const revoked = holders.isRevoked(fromNode)
    for (let shardId = first; shardId < Math.min(first + count, next.totalShards); shardId++) {
      if ((owners[shardId] !== fromId || revoked) && owners[shardId] !== NO_NODE && next.handoffs.fromOf(shardId) === NO_NODE) next.handoffs.record(shardId, fromId, atGeneration)
    }
  }
}
