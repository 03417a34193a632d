/**
 * The last two steps of an Identify claim (SPEC "Identify claims", "Session handoff"), once ownership,
 * barriers and handoffs allow it: a held session is handed out (a RESUME: no bucket slot, no daily
 * budget), or the daily budget and the bucket decide an ordinary grant.
 */
import { DAILY_WINDOW_MS, type IdentifyLimiter } from './identify.js'
import type { SessionVault } from './session-vault.js'
import type { StateTracker } from './state-tracker.js'
import type { CoreEvent, IdentifyOutcome } from './types.js'

/** What a grant reads and changes of the controller. */
export interface GrantDesk {
  readonly limiter: IdentifyLimiter
  readonly sessions: SessionVault
  readonly tracker: StateTracker
  readonly generation: number
  emit(event: CoreEvent): void
  markDurable(): void
}

/** The session held for `shardId`, handed out once (null: none, or the claim is `fresh` and drops it). */
export function handOutSession(desk: GrantDesk, now: number, nodeId: string, shardId: number, fresh: boolean): IdentifyOutcome | null {
  if (fresh) {
    desk.sessions.discard(shardId) // the node's RESUME was refused: the session is spent
    return null
  }
  const session = desk.sessions.take(now, shardId)
  if (session === null) return null
  const generation = desk.generation
  desk.emit({ kind: 'session_handed', nodeId, shardId, generation })
  return { granted: true, mode: 'resume', shardId, bucket: desk.limiter.bucketOf(shardId), generation, session }
}

/** The daily budget, then the bucket (shared by both sets of a live reshard); a grant is recorded and audited. */
export function grantIdentify(desk: GrantDesk, now: number, nodeId: string, shardId: number, set: 'current' | 'next'): IdentifyOutcome {
  const { limiter, generation } = desk
  const wait = limiter.check(now, shardId)
  if (wait !== null) return { granted: false, reason: wait.reason, retryAfterMs: wait.retryAfterMs }
  const bucket = limiter.record(now, shardId)
  if (limiter.countsDaily) {
    desk.tracker.grant(now, now - DAILY_WINDOW_MS + 1)
    desk.markDurable()
  }
  desk.emit({ kind: 'identify_granted', nodeId, shardId, bucket, generation, ...(set === 'next' ? { set } : {}) })
  return set === 'next' ? { granted: true, mode: 'identify', shardId, bucket, generation, set } : { granted: true, mode: 'identify', shardId, bucket, generation }
}
