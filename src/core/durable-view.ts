/**
 * The durable state as the controller's parts hold it: the whole state for a first write or a compaction,
 * and the current values a delta reads for what the StateTracker marked.
 */
import type { DurableState, PersistedNode, StateMeta } from './durable-state.js'
import type { HandoffLedger } from './handoffs.js'
import type { IdentifyLimiter } from './identify.js'
import type { LivePlan } from './live-plan.js'
import type { NodeIndex } from './node-index.js'
import { persistedNode, type NodeRecord } from './node-record.js'
import type { StateLookups } from './state-tracker.js'
import type { ControllerSettings } from './types.js'

/** The parts of a controller that hold durable state (read here, never written). */
export interface DurableParts {
  readonly live: ReadonlyMap<string, NodeRecord>
  readonly draining: ReadonlySet<string>
  readonly nodes: NodeIndex
  readonly plan: LivePlan
  readonly handoffs: HandoffLedger
  readonly limiter: IdentifyLimiter
}

/** What a reshard puts in the meta record (core/reshards.ts). */
export type ReshardMeta = Pick<StateMeta, 'reshard' | 'liveReshard' | 'retired'>

/**
 * The meta record of a controller's state: settings, generation, plan fingerprint, barriers, CRL number,
 * the configured shard count after a live reshard's switch, and the revoked holders inside their lease.
 */
export function stateMeta(
  settings: ControllerSettings,
  generation: number,
  planFingerprint: string,
  reshards: ReshardMeta,
  crlNumber: bigint | null,
  configuredTotalShards: number,
  revoked: StateMeta['revoked'],
): StateMeta {
  const base: StateMeta = {
    generation,
    totalShards: settings.totalShards,
    maxConcurrency: settings.maxConcurrency,
    planFingerprint,
    reshard: reshards.reshard,
    crlNumber: crlNumber?.toString() ?? null,
  }
  // Absent for the contiguous planner: its states are written exactly as before the choice existed.
  const meta: StateMeta = settings.planner === 'stable' ? { ...base, planner: 'stable' } : base
  const { liveReshard, retired } = reshards
  const configured = configuredTotalShards === settings.totalShards ? undefined : configuredTotalShards
  if (liveReshard === undefined && configured === undefined && retired === undefined && revoked === undefined) return meta // the common case: written exactly as before
  return {
    ...meta,
    ...(liveReshard === undefined ? {} : { liveReshard }),
    ...(configured === undefined ? {} : { configuredTotalShards: configured }),
    ...(retired === undefined ? {} : { retired }),
    ...(revoked === undefined ? {} : { revoked }),
  }
}

/** The whole durable state under `meta`. O(N + S). */
export function durableSnapshot(parts: DurableParts, meta: StateMeta): DurableState {
  const nodes: PersistedNode[] = []
  const withRanges = parts.plan.persistsRanges
  parts.plan.records.forEach((record, at) => nodes.push(persistedNode(record, withRanges ? parts.plan.rangeAt(at) : undefined)))
  return {
    version: 2,
    meta,
    nodes,
    draining: [...parts.draining].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
    handoffs: parts.handoffs.entries(),
    dailyGrants: parts.limiter.dailyGrants(),
  }
}

/** How a delta reads the current value of what was marked changed. */
export function stateLookups(parts: DurableParts): StateLookups {
  return {
    node: (nodeId) => {
      const record = parts.live.get(nodeId)
      if (record === undefined) return null
      return persistedNode(record, parts.plan.persistsRanges ? parts.plan.rangeOf(nodeId) : undefined)
    },
    isDraining: (nodeId) => parts.draining.has(nodeId),
    handoffFrom: parts.handoffs.tables.from,
    handoffGeneration: parts.handoffs.tables.generation,
    nodeName: (id) => parts.nodes.nameOf(id)!,
  }
}
