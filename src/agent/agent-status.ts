/** What a NodeAgent exposes to its host's monitoring. */
import type { HaltReason } from './agent-events.js'

/** Where an agent stands: not started, waiting for its first plan, holding authority, not, or halted. */
export type AgentState = 'idle' | 'joining' | 'active' | 'no_authority' | 'halted'

/** How an agent ended. */
export interface AgentEnd {
  readonly reason: HaltReason
  readonly detail: string
}

/** A snapshot of the agent; times are wall-clock ms since the epoch. */
export interface AgentStatus {
  readonly nodeId: string
  readonly state: AgentState
  /** Generation of the last accepted plan (this process), or null. */
  readonly acceptedGeneration: number | null
  /** Generation reported in check-ins: the newest plan whose removals are all stopped. */
  readonly reportedGeneration: number | null
  /** Shards of the accepted plan. */
  readonly assigned: readonly number[]
  readonly running: readonly number[]
  readonly starting: readonly number[]
  readonly stopping: readonly number[]
  /** Shards whose start failed (claimed again after startRetryMs). */
  readonly failed: readonly number[]
  /** Shards waiting for an Identify grant. */
  readonly claiming: readonly number[]
  /** A live reshard's next set as this node runs it beside the current one, or null when none is under way. */
  readonly next: { readonly totalShards: number; readonly assigned: readonly number[]; readonly running: readonly number[]; readonly starting: readonly number[]; readonly claiming: readonly number[] } | null
  /** When the last check-in whose plan was accepted was sent. */
  readonly lastRenewalSentAt: number | null
  /** When its answer came. */
  readonly lastRenewalAckAt: number | null
  /** When authority over the shards ends unless renewed (null: none held). */
  readonly authorityEndsAt: number | null
  /** The controller URL in use. */
  readonly controller: string
  readonly lastError: string | null
  readonly halted: AgentEnd | null
}
