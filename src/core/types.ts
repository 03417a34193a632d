/**
 * The contract of the pure controller core: what the HTTP layer, the state store and the audit log
 * see of it. All times are milliseconds on the injected clock (epoch-based, monotonic in practice).
 */
import type { PersistedHandoff, PersistedNode } from './durable-state.js'
import type { PlannerName } from './planner.js'
import type { DailyBudget } from './identify.js'
import type { HeldSession } from './session-vault.js'

/** Static settings of one deployment (validated by the config loader). */
export interface ControllerSettings {
  readonly totalShards: number // 1..65536
  readonly maxConcurrency: number // 1..65536; totalShards % maxConcurrency === 0 when > 1
  readonly leaseSeconds: number // default 30
  readonly identifyIntervalMs: number // default 5100
  readonly dailyIdentifyLimit: number | null // null: no budget
  /** SPEC "Planner choice"; absent: contiguous (the default). */
  readonly planner?: PlannerName
  /** SPEC "Session handoff"; absent: the defaults (Discord's gateway hosts, 60 s). */
  readonly sessionHandoff?: SessionHandoffSettings
  /** SPEC "REST budget"; absent: off (no share in any answer). */
  readonly rest?: RestSettings
}

/** The bot's REST limits the controller shares among the nodes. */
export interface RestSettings {
  readonly globalPerSecond: number // Discord's global limit (50 by default for a bot)
  readonly safety: number // 0 < safety <= 1: the part of the limits handed out
  readonly invalidPer10Minutes: number // Discord bans an address at 10,000 invalid requests in 10 minutes
}

/** Where deposited sessions may send a node, and how long the controller holds them. */
export interface SessionHandoffSettings {
  readonly allowedHosts: readonly string[]
  readonly ttlSeconds: number // 1..300
}

/** The certificate a request came with, as far as the core cares. */
export interface CertRef {
  readonly serial: string // lower-case hex, no colons
  readonly notBefore: number // ms since epoch
  /** When the certificate expires (ms since epoch), for the operator's view; not persisted. */
  readonly notAfter?: number
}

/** One contiguous range of the plan. */
export interface NodeRange {
  readonly rangeStart: number
  readonly rangeCount: number
}

/** What the core answers a check-in with (the HTTP layer adds `assigned` and `plan_jws`). */
export interface CheckinOutcome extends NodeRange {
  readonly generation: number
  readonly totalShards: number
  readonly leaseSeconds: number
  readonly maxConcurrency: number
  /** True when this check-in replaced the node's certificate (a rotation, to be audited). */
  readonly rotated: boolean
  readonly previousSerial: string | null
  /** The node's part of a live reshard's next set, or null when none is in progress. */
  readonly next: NextRange | null
  /** The node's REST share (SPEC "REST budget"), or null when the controller shares none. */
  readonly rest: RestShareOutcome | null
}

/** A REST share as answered: requests per second (2 decimals), invalid requests per 10 minutes, its end (ms). */
export interface RestShareOutcome {
  readonly perSecond: number
  readonly invalidBudget: number
  readonly untilMs: number
}

/** A node's range in a live reshard's next set (SPEC "Live resharding"). */
export interface NextRange extends NodeRange {
  readonly totalShards: number
}

export type IdentifyOutcome =
  | {
      readonly granted: true
      /** resume: a held session is handed out (no bucket slot, no daily budget); identify: an ordinary grant. */
      readonly mode: 'identify' | 'resume'
      readonly shardId: number
      readonly bucket: number
      readonly generation: number
      readonly session?: HeldSession
      /** Present for a claim of a live reshard's next set. */
      readonly set?: 'next'
    }
  | {
      readonly granted: false
      readonly retryAfterMs: number
      readonly reason: 'bucket_busy' | 'handoff_pending' | 'daily_limit'
    }

export interface RouteOutcome {
  readonly guildId: string // echoed exactly as given
  readonly shardId: number
  readonly nodeId: string | null
  readonly generation: number
}

export interface PlanNodeView extends NodeRange {
  readonly nodeId: string
  readonly capacity: number
  readonly draining: boolean
  readonly lastSeen: number // ms; the HTTP layer renders ISO 8601
  readonly generation: number | null // reported by the node, or null
  readonly readyShards: number
  readonly startingShards: number
  readonly backoffShards: number
  readonly fatalShards: number
  /** Shards taken from this node that wait for it to release them (handoffs). */
  readonly pendingHandoffs: number
  /** When the certificate of its last check-in expires (ms), or null (not checked in since a restart). */
  readonly certNotAfter: number | null
  /** Its part of a live reshard's next set, and how many of those shards it reported running; null: no reshard. */
  readonly next: { readonly rangeStart: number; readonly rangeCount: number; readonly readyShards: number } | null
  /** Its REST share in force and its last reported demand; null when it reports none (no REST proxy) or the controller shares no REST budget. */
  readonly rest: RestNodeView | null
}

/** One node's REST share in force (0 when none) and the demand it last reported. */
export interface RestNodeView {
  readonly perSecond: number
  readonly invalidBudget: number
  readonly demand: { readonly perSecond: number; readonly invalid10m: number }
}

/** The REST budget as a whole: the configured limits, the safe budgets, and what the shares in force hand out. */
export interface RestBudgetView {
  readonly globalPerSecond: number
  readonly safety: number
  readonly budgetPerSecond: number
  readonly invalidBudget: number
  readonly allocatedPerSecond: number
  readonly allocatedInvalid: number
  readonly demandPerSecond: number
}

/** A reshard the operator can see: the barrier after a restart with another plan (core/reshard.ts), or a live one. */
export type ReshardView = RestartBarrierView | LiveReshardView

export interface RestartBarrierView {
  readonly phase: 'restart_barrier'
  readonly totalShards: number
  /** The first generation planned with the new shard count or planner. */
  readonly generation: number
  /** Restored nodes that have not applied that plan yet. */
  readonly waitingNodes: number
}

/** A live reshard in progress (SPEC "Live resharding"): the next set identifies beside the current one. */
export interface LiveReshardView {
  readonly phase: 'identifying'
  readonly fromTotalShards: number
  readonly totalShards: number
  /** The generation whose plans first carried the next set. */
  readonly generation: number
  /** Next-set shards reported running by their owners. */
  readonly readyShards: number
  /** Next-set shards no live node can take (capacity): the switch waits for them. */
  readonly unassigned: number
  /** Next-set shards whose previous owner (a re-plan during the reshard) has not released them. */
  readonly pendingHandoffs: number
}

/** What starting a live reshard answers (202). */
export interface ReshardStarted {
  readonly from: number
  readonly to: number
  readonly generation: number
}

export interface PlanView {
  readonly generation: number
  readonly totalShards: number
  readonly maxConcurrency: number
  readonly leaseSeconds: number
  readonly unassigned: number
  readonly planner: PlannerName
  /** The rolling daily Identify budget, or null without daily_identify_limit. */
  readonly identify: DailyBudget | null
  /** Shards whose new owner waits for the old one to release them. */
  readonly pendingHandoffs: number
  readonly reshard: ReshardView | null
  /** Names flagged for drain that are not live (the flag waits for them), byte order. */
  readonly drainFlagsNotLive: readonly string[]
  /** Nodes that left on purpose within the last hour, newest first (memory only: a restart forgets them). */
  readonly recentLeaves: readonly { readonly nodeId: string; readonly at: number }[]
  /** The REST budget (SPEC "REST budget"), or null when the configuration has none. */
  readonly rest: RestBudgetView | null
  readonly nodes: readonly PlanNodeView[] // byte order of node IDs
}

export interface DrainOutcome {
  readonly nodeId: string
  readonly draining: boolean
  readonly generation: number
  /** Whether the node is live (a flag on a name that is not live waits for it to join). */
  readonly live: boolean
  /** Shards the plan leaves without a node after the change. */
  readonly unassigned: number
}

/** Events the core emits for the audit log; drained by the caller after each operation. */
export type CoreEvent =
  | { readonly kind: 'generation_changed'; readonly from: number; readonly to: number }
  | { readonly kind: 'node_expired'; readonly nodeId: string; readonly lastSeen: number }
  | { readonly kind: 'node_removed'; readonly nodeId: string; readonly serial: string; readonly reason: 'revoked' }
  | { readonly kind: 'node_left'; readonly nodeId: string; readonly serial: string; readonly sessions: number }
  | {
      readonly kind: 'node_rotated'
      readonly nodeId: string
      readonly fromSerial: string
      readonly toSerial: string
    }
  | {
      readonly kind: 'reshard'
      /** What changed: total_shards, the planner (another plan for the same nodes), or max_concurrency alone. */
      readonly reason: 'total_shards' | 'planner' | 'max_concurrency'
      readonly fromTotalShards: number
      readonly toTotalShards: number
      readonly fromMaxConcurrency: number | null // null: written before it was recorded
      readonly toMaxConcurrency: number
      readonly generation: number
      /** Restored nodes that must apply the new plan (or leave) before any Identify is granted. */
      readonly waitingFor: number
    }
  | {
      readonly kind: 'identify_granted'
      readonly nodeId: string
      readonly shardId: number
      readonly bucket: number
      readonly generation: number
      /** Present for a grant in a live reshard's next set. */
      readonly set?: 'next'
    }
  | { readonly kind: 'reshard_started'; readonly fromTotalShards: number; readonly toTotalShards: number; readonly generation: number }
  | { readonly kind: 'reshard_switched'; readonly fromTotalShards: number; readonly toTotalShards: number; readonly generation: number }
  | {
      readonly kind: 'reshard_aborted'
      readonly fromTotalShards: number
      readonly toTotalShards: number
      readonly generation: number
      /** operator: DELETE /v1/reshard; restart: the controller restarted with another configuration. */
      readonly reason: 'operator' | 'restart'
    }
  /** Sessions carry no values here: events reach the audit log, sessions never do. */
  | { readonly kind: 'session_deposited'; readonly nodeId: string; readonly shardId: number; readonly generation: number }
  | { readonly kind: 'session_handed'; readonly nodeId: string; readonly shardId: number; readonly generation: number }

/**
 * The version-1 state file body written by earlier releases (ranges stored per node). Read back and
 * converted to a DurableState (core/durable-state-schema.ts); never written any more.
 */
export interface SnapshotV1 {
  readonly version: 1
  readonly generation: number
  readonly totalShards: number
  readonly nodes: readonly (PersistedNode & NodeRange)[]
  /** Operator drain flags, kept for nodes that are not live too. */
  readonly draining: readonly string[]
  /** Shards whose previous owner has not yet released them. */
  readonly handoffs: readonly PersistedHandoff[]
  /** Grant times (ms) still inside the rolling 24-hour daily Identify window. */
  readonly dailyGrants: readonly number[]
  /** The highest CRL number installed (decimal); absent in files written before it was recorded. */
  readonly crlNumber?: string
}

/** What a check-in did besides renewing the lease (the plan part of the answer comes after settle()). */
export interface Registration {
  /** True when this check-in replaced the node's certificate (a rotation, to be audited). */
  readonly rotated: boolean
  readonly previousSerial: string | null
  /** True when the check-in carried `rest_demand`: its answer carries the node's REST share (SPEC "REST budget"). */
  readonly reportsRest?: boolean
}
