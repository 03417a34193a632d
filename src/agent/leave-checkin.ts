/**
 * The last check-in of a node that shuts down on purpose (SPEC "Leaving on purpose"): `"leaving": true`,
 * counts 0, the generation whose removals have all stopped, and the sessions of the shards it stopped,
 * so that the controller moves them at once and their new owners RESUME. It is bounded: a node that is
 * shutting down must not hang on an unreachable controller; without an answer its lease runs out as
 * after a crash (the shards then move one lease later, without their sessions).
 */
import type { AgentEvent } from './agent-events.js'
import type { AgentClock } from './clock.js'
import { checkInDepositing, type SentCheckin } from './depositing-checkin.js'
import type { DepositBatch, SessionDeposits, SessionEntry } from './session-deposits.js'

/** The longest a leave waits for its answer (ms): systemd's stop timeout must hold the stops and this. */
export const MAX_LEAVE_WAIT_MS = 5000

/** How long a leave waits for its answer: at most MAX_LEAVE_WAIT_MS and a third of the lease (a check-in's own bound). */
export function leaveWaitMs(leaseMs: number | null): number {
  return leaseMs === null ? MAX_LEAVE_WAIT_MS : Math.max(500, Math.min(MAX_LEAVE_WAIT_MS, Math.floor(leaseMs / 3)))
}

/** What the leave needs from the agent. */
export interface LeaveDeps {
  readonly clock: AgentClock
  readonly deposits: SessionDeposits
  /** Sends the leaving check-in with these sessions (the client fails over on a connection error or 503). */
  send(sessions: readonly SessionEntry[]): Promise<SentCheckin>
  emit(event: AgentEvent): void
  /** How long to wait for the answer (ms). */
  readonly waitMs: number
}

/** Sends the leave with `batch`'s sessions and waits, bounded, for its answer; reports the outcome as an event. */
export async function sendLeave(batch: DepositBatch, deps: LeaveDeps): Promise<boolean> {
  let inTime!: (value: 'late') => void
  const late = new Promise<'late'>((resolve) => (inTime = resolve))
  const timer = deps.clock.setTimeout(() => inTime('late'), deps.waitMs)
  const sent = await Promise.race([checkInDepositing(batch, deps), late])
  deps.clock.clearTimeout(timer)
  if (sent === 'late') {
    deps.emit({ type: 'leave_failed', detail: `no controller answered the leave within ${deps.waitMs} ms` })
    return false
  }
  if ('error' in sent) {
    deps.emit({ type: 'leave_failed', detail: sent.error instanceof Error ? sent.error.message.slice(0, 300) : String(sent.error) })
    return false
  }
  const { reply } = sent
  if (reply.status === 200) {
    deps.emit({ type: 'left', controller: reply.url })
    return true
  }
  // Neither the controller's message (it may quote input) nor any session value is reported.
  deps.emit({ type: 'leave_failed', detail: `${reply.url} answered the leave ${reply.status} ${reply.errorCode ?? ''}`.trim() })
  return false
}
