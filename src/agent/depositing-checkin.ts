/**
 * A check-in that carries sessions (SPEC "Session handoff", Deposit). The controller refuses a whole
 * check-in over one entry it does not accept, and a renewal matters more than a resume: a refusal drops
 * the sessions and the same report goes again at once, with the entries the refusal did not name (once)
 * or without any. Without an answer (a network error, 503 everywhere, 429) they stay for the retry of
 * this check-in.
 */
import type { AgentEvent } from './agent-events.js'
import type { ControllerReply } from './controller-client.js'
import type { DepositBatch, SessionDeposits, SessionEntry } from './session-deposits.js'

/** One check-in as sent: when (authority counts from it), and the answer or the error. */
export type SentCheckin = { readonly sentAt: number; readonly reply: ControllerReply } | { readonly sentAt: number; readonly error: unknown }

/** What the exchange needs from the agent. */
export interface DepositingCheckinDeps {
  readonly deposits: SessionDeposits
  /** Sends the check-in with these sessions (the same report each time). */
  send(sessions: readonly SessionEntry[]): Promise<SentCheckin>
  emit(event: AgentEvent): void
}

/** The controller refused the body: with sessions, one of them is the likely cause (413: they made it too large). */
function refusesBody(reply: ControllerReply): boolean {
  return (reply.status === 400 && reply.errorCode === 'invalid_request') || reply.status === 413
}

/** Sends the check-in with `batch`'s sessions; returns the answer that counts (the resend's, after a refusal). */
export async function checkInDepositing(batch: DepositBatch, deps: DepositingCheckinDeps): Promise<SentCheckin> {
  const sent = await deps.send(batch.entries)
  if (batch.entries.length === 0 || !('reply' in sent)) return sent
  const { status, url } = sent.reply
  if (status !== 200 && !refusesBody(sent.reply)) return sent
  deps.deposits.settle(batch)
  const shardIds = batch.entries.map((entry) => entry.shard_id)
  if (status === 200) {
    deps.emit({ type: 'sessions_deposited', shardIds, controller: url })
    return sent
  }
  // Neither the controller's message (it may quote input) nor any session value is reported.
  deps.emit({ type: 'sessions_refused', shardIds, controller: url, status })
  // When the controller names the one entry it refused (typically a shard a later plan gave back to this
  // node before the release arrived), the rest goes once more; any refusal of that resend sends none.
  const refused = sent.reply.refusedShardId
  const rest = refused === null ? [] : batch.entries.filter((entry) => entry.shard_id !== refused)
  if (rest.length === 0 || rest.length === batch.entries.length) return deps.send([])
  const again = await deps.send(rest)
  if (!('reply' in again)) return again
  if (again.reply.status === 200) {
    deps.emit({ type: 'sessions_deposited', shardIds: rest.map((entry) => entry.shard_id), controller: again.reply.url })
    return again
  }
  if (!refusesBody(again.reply)) return again
  deps.emit({ type: 'sessions_refused', shardIds: rest.map((entry) => entry.shard_id), controller: again.reply.url, status: again.reply.status })
  return deps.send([])
}
