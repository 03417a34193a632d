/**
 * What an agent reports to its host (`onEvent`) and to its log. One union, so that a host can switch
 * on `type`; every event is also logged at a fitting level by the agent itself.
 */
import type { Logger } from 'pino'
import type { ClaimOutcome } from './claim-scheduler.js'
import type { AuthorityLoss } from './plan-manager.js'
import type { PlanRefusalReason } from './plan-verifier.js'
import type { SessionDropReason } from './session-deposits.js'
import type { ShardRunnerHooks, StartMode, StopReason } from './shard-runner.js'

/** Why a plan was refused: a verification reason, or plain fields that disagree with the signed ones. */
export type RefusalReason = PlanRefusalReason | 'plain_mismatch'

/** Everything an agent reports. */
export type AgentEvent =
  | { readonly type: 'plan_accepted'; readonly generation: number; readonly assigned: readonly number[]; readonly changed: boolean; readonly controller: string }
  | { readonly type: 'plan_refused'; readonly reason: RefusalReason; readonly detail: string; readonly controller: string }
  | { readonly type: 'checkin_failed'; readonly detail: string }
  /** `waitedMs`, for a grant: how long the shard waited for it (from when it was first wanted); else null. */
  | { readonly type: 'claim'; readonly shardId: number; readonly set?: 'next'; readonly outcome: ClaimOutcome; readonly waitedMs: number | null }
  | { readonly type: 'shard_started'; readonly shardId: number; readonly generation: number; readonly mode: StartMode }
  | { readonly type: 'shard_start_failed'; readonly shardId: number; readonly detail: string }
  | { readonly type: 'resume_refused'; readonly shardId: number }
  | { readonly type: 'shard_stopped'; readonly shardId: number; readonly reason: StopReason }
  | { readonly type: 'shard_stop_failed'; readonly shardId: number; readonly reason: StopReason; readonly detail: string }
  | { readonly type: 'shard_stop_timed_out'; readonly shardId: number; readonly reason: StopReason; readonly timeoutMs: number }
  /** The host stopped at once (stopNow(): pxe-node's second signal) while this stop ran: it was cut short, and the shard MAY STILL BE RUNNING. */
  | { readonly type: 'shard_stop_cut_short'; readonly shardId: number; readonly reason: StopReason }
  | { readonly type: 'sessions_deposited'; readonly shardIds: readonly number[]; readonly controller: string }
  | { readonly type: 'sessions_refused'; readonly shardIds: readonly number[]; readonly controller: string; readonly status: number }
  | { readonly type: 'sessions_dropped'; readonly reason: SessionDropReason; readonly shardIds: readonly number[]; readonly detail: string }
  | { readonly type: 'authority_lost'; readonly reason: AuthorityLoss }
  /** The leaving check-in was answered 200: the controller took this node out of the plan at once (SPEC "Leaving on purpose"). */
  | { readonly type: 'left'; readonly controller: string }
  /** The leave did not reach the controller (not sent, refused, or unanswered in time): the node's lease runs out instead. */
  | { readonly type: 'leave_failed'; readonly detail: string }
  /**
   * `definitive`: every controller URL refused the certificate on new connections, twice in a row; the
   * agent halts (`halted` follows, once every shard stopped). Otherwise probable (some controllers only):
   * the agent goes on trying, and the fail-safe stops the shards unless a renewal comes.
   */
  | { readonly type: 'certificate_refused'; readonly definitive: boolean; readonly detail: string }
  | { readonly type: 'halted'; readonly reason: HaltReason; readonly detail: string }
  /** A renewed certificate is in use for new connections (`notAfter`: wall ms). */
  | { readonly type: 'certificate_renewed'; readonly serial: string; readonly notAfter: number }
  /** A renewal failed; it is tried again in `retryInMs`. `expiresAt`: the certificate in use ends then (wall ms). */
  | { readonly type: 'certificate_renewal_failed'; readonly detail: string; readonly retryInMs: number; readonly expiresAt: number }

/** Why an agent stopped for good. */
export type HaltReason = 'shutdown' | 'certificate_refused' | 'stop_timeout_too_long'

type Level = 'debug' | 'info' | 'warn' | 'error'

/** The log level of an event. */
function levelOf(event: AgentEvent): Level {
  switch (event.type) {
    case 'plan_accepted':
      return event.changed ? 'info' : 'debug'
    case 'claim':
      return 'debug'
    case 'shard_started':
    case 'shard_stopped':
    case 'resume_refused':
    case 'sessions_deposited':
    case 'certificate_renewed':
    case 'left':
      return 'info'
    case 'sessions_dropped':
      return event.reason === 'not_a_plan_move' ? 'debug' : 'warn'
    case 'plan_refused':
    case 'checkin_failed':
    case 'sessions_refused':
    case 'certificate_renewal_failed':
    case 'leave_failed':
      return 'warn'
    case 'certificate_refused':
      return event.definitive ? 'error' : 'warn'
    case 'halted':
      return event.reason === 'shutdown' ? 'info' : 'error'
    default:
      return 'error'
  }
}

const MESSAGES: Record<AgentEvent['type'], string> = {
  plan_accepted: 'plan accepted',
  plan_refused: 'plan refused; the last accepted plan stays in force until its lease ends',
  checkin_failed: 'check-in failed',
  claim: 'identify claim answered',
  shard_started: 'shard started',
  shard_start_failed: 'shard start failed',
  resume_refused: 'the host could not resume the handed-over session: claiming a fresh Identify, then starting again',
  shard_stopped: 'shard stopped',
  shard_stop_failed: 'shard stop failed; it is retried and the new generation is not reported until it succeeds',
  shard_stop_timed_out: 'shard stop did not end within the stop timeout and was abandoned: the shard MAY STILL BE RUNNING; it is retried and the new generation is not reported until a stop succeeds',
  shard_stop_cut_short: 'shard stop cut short: the agent stops at once (a second signal); the shard MAY STILL BE RUNNING',
  sessions_deposited: "sessions deposited for the shards' new owners",
  sessions_refused: 'the controller refused the check-in carrying sessions: sent again at once without them (the new owners will Identify)',
  sessions_dropped: 'sessions dropped: the new owners will Identify',
  authority_lost: 'authority over the shards ended: every shard is stopped',
  left: "left on purpose: the controller took this node out of the plan at once; its shards move now",
  leave_failed: "the leave did not reach the controller: this node's shards move once its lease runs out",
  certificate_refused: "every controller refuses this node's certificate: every shard is stopped and the agent halts",
  halted: 'agent halted',
  certificate_renewed: 'certificate renewed: new connections use the new one (the next check-in records the rotation)',
  certificate_renewal_failed: 'certificate renewal failed; trying again (if none succeeds before expiry, the controller refuses the certificate and the fail-safe stops the shards)',
}

/** A probable refusal's message (MESSAGES has the definitive one). */
const PROBABLE_REFUSAL = "a controller refuses this node's certificate, but not every one: still trying; the fail-safe stops the shards unless a renewal comes"

/** Logs an event at its level (the event's fields as the log object). */
export function logEvent(logger: Logger, event: AgentEvent): void {
  const message = event.type === 'certificate_refused' && !event.definitive ? PROBABLE_REFUSAL : MESSAGES[event.type]
  logger[levelOf(event)]({ event: event.type, ...event, type: undefined }, message)
}

/** The runner's reports as agent events. */
export function runnerHooks(emit: (event: AgentEvent) => void): ShardRunnerHooks {
  return {
    started: (ctx, mode) => emit({ type: 'shard_started', shardId: ctx.shardId, generation: ctx.generation, mode }),
    startFailed: (ctx, err) => emit({ type: 'shard_start_failed', shardId: ctx.shardId, detail: describe(err) }),
    resumeRefused: (ctx) => emit({ type: 'resume_refused', shardId: ctx.shardId }),
    stopped: (ctx) => emit({ type: 'shard_stopped', shardId: ctx.shardId, reason: ctx.reason }),
    stopFailed: (ctx, err) => emit({ type: 'shard_stop_failed', shardId: ctx.shardId, reason: ctx.reason, detail: describe(err) }),
    stopTimedOut: (ctx) => emit({ type: 'shard_stop_timed_out', shardId: ctx.shardId, reason: ctx.reason, timeoutMs: ctx.timeoutMs }),
    stopCutShort: (ctx) => emit({ type: 'shard_stop_cut_short', shardId: ctx.shardId, reason: ctx.reason }),
    sessionDiscarded: (ctx) =>
      emit({ type: 'sessions_dropped', reason: 'not_a_plan_move', shardIds: [ctx.shardId], detail: `a session is handed over only after a plan move or a leave, not a ${ctx.reason} stop` }),
  }
}

/** A short description of a thrown value (no stack). */
export function describe(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 300)
}
