/**
 * What survives a restart (SPEC "Running": generation, node records with their reported generations and
 * pending handoffs, draining flags, the grants counted against the daily budget), as the core hands it to
 * a state store: whole (`DurableState`, for a first write or a compaction) or as the change since the
 * last write (`StateDelta`), so that the cost of a write follows the size of the change, not of the fleet.
 *
 * Under the contiguous planner ranges are not stored per node: it is deterministic from the live set, so
 * the restored node records give the same plan again. The stable planner plans from the current plan, so
 * under it each record carries its range and the meta names the planner. `planFingerprint` (a hash of the
 * ranges) tells a restore whether the plan still holds (e.g. after an upgrade that changed the planner);
 * when it does not, or the planner changed, the restore is treated as a reshard.
 */

/**
 * A node record as persisted. Its range is recomputed by the contiguous planner; the stable planner plans
 * from the current ranges, so under it the record carries its range (absent in states written without it).
 */
export interface PersistedNode {
  readonly nodeId: string
  readonly capacity: number
  readonly reportedGeneration: number | null
  readonly certSerial: string
  readonly certNotBefore: number
  readonly readyShards: number
  readonly startingShards: number
  readonly backoffShards: number
  readonly fatalShards: number
  /** [range_start, range_count] in the current plan; only under the stable planner. */
  readonly range?: readonly [number, number]
}

/** A shard whose previous owner has not released it yet. */
export interface PersistedHandoff {
  readonly shardId: number
  readonly fromNode: string
  readonly generation: number
}

/** The small, always-written part of the state. */
export interface StateMeta {
  readonly generation: number
  readonly totalShards: number
  /** Null only in a state converted from a release that did not record it. */
  readonly maxConcurrency: number | null
  /** SHA-256 (hex) of the plan's ranges; see core/plan-fingerprint.ts. */
  readonly planFingerprint: string
  /** A reshard still waiting for restored nodes to apply the new plan (see core/reshard.ts). */
  readonly reshard: { readonly generation: number; readonly waitingFor: readonly string[] } | null
  /** The highest CRL number ever installed (decimal), so a restart on an older CRL is refused. */
  readonly crlNumber: string | null
  /** The planner that made the plan; absent: contiguous (states written before the choice existed). */
  readonly planner?: 'stable'
  /** A live reshard in progress (SPEC "Live resharding"); absent: none. */
  readonly liveReshard?: PersistedLiveReshard
  /**
   * The configuration's total_shards when a live reshard's switch made `totalShards` differ from it:
   * a restart with that configuration unchanged keeps the switched count. Absent: they agree.
   */
  readonly configuredTotalShards?: number
  /**
   * The last live reshard's abort or switch while some node may still run the shards it retired (SPEC
   * "One session per shard, across reshards"); absent: none. A new reshard waits for it.
   */
  readonly retired?: { readonly totalShards: number; readonly generation: number; readonly waitingFor: readonly string[] }
  /** Revoked nodes inside their lease, whose shards' handoffs wait for it (SPEC "Leases"); absent: none. */
  readonly revoked?: readonly PersistedRevokedHolder[]
}

/** A revoked node inside its lease: its node ID, its certificate's serial, the generation that took its shards. */
export type PersistedRevokedHolder = readonly [nodeId: string, serial: string, generation: number]

/** A live reshard's next set as persisted: its ranges are recomputed (the stable planner's are stored). */
export interface PersistedLiveReshard {
  readonly fromTotalShards: number
  readonly toTotalShards: number
  /** The generation whose plans first carried the next set. */
  readonly startedAt: number
  /** The generation of the last plan that changed the next set. */
  readonly changedAt: number
  /** Next-set shards whose previous owner has not released them. */
  readonly handoffs: readonly HandoffRun[]
  /** [node_id, range_start, range_count] per node holding next-set shards; only under the stable planner. */
  readonly ranges?: readonly (readonly [string, number, number])[]
}

/** The whole durable state. */
export interface DurableState {
  readonly version: 2
  readonly meta: StateMeta
  readonly nodes: readonly PersistedNode[]
  /** Operator drain flags, kept for nodes that are not live too. */
  readonly draining: readonly string[]
  readonly handoffs: readonly PersistedHandoff[]
  /** Grant times (ms) still inside the rolling 24-hour daily Identify window. */
  readonly dailyGrants: readonly number[]
}

/**
 * Shards firstShard .. firstShard + count - 1, each waiting for `fromNode` since `generation`. A re-plan
 * at N = 10,000 can move tens of thousands of shards, but they leave each node as one contiguous run:
 * a run per node keeps the change (and its journal line) proportional to the nodes involved.
 */
export type HandoffRun = readonly [firstShard: number, count: number, fromNode: string, generation: number]

/** Shards firstShard .. firstShard + count - 1. */
export type ShardRun = readonly [firstShard: number, count: number]

/** The change since the previous write; applying it to that state gives the new one (state/apply-delta.ts). */
export interface StateDelta {
  readonly meta: StateMeta
  readonly putNodes: readonly PersistedNode[]
  readonly deleteNodes: readonly string[]
  readonly putDraining: readonly string[]
  readonly deleteDraining: readonly string[]
  /** Handoffs set, as runs in shard order. */
  readonly putHandoffs: readonly HandoffRun[]
  /** Shards whose handoff is released, as runs in shard order. */
  readonly deleteHandoffs: readonly ShardRun[]
  readonly addGrants: readonly number[]
  /** Grants before this time (ms) have left the daily window; null: none dropped. */
  readonly dropGrantsBefore: number | null
}
