/**
 * Sessions of shards the plan moved away, held until the check-in that releases their handoff (SPEC
 * "Session handoff", Deposit). The controller refuses a WHOLE check-in over one entry it does not
 * accept, and a check-in renews the lease, so an entry goes only where it can be accepted: into a
 * check-in whose `generation` covers the plan that moved the shard, for a shard that plan did not give
 * back, at most 128 at a time. Dropped sessions are reported by shard ID only, never by value.
 */
import type { AgentClock } from './clock.js'
import { parseHostSession, type ResumableSession } from './session.js'

/** One `sessions` entry of a check-in body. */
export interface SessionEntry {
  readonly shard_id: number
  readonly session_id: string
  readonly sequence: number
  readonly resume_url: string
}

/** Most entries one check-in may carry (the controller refuses more). */
export const MAX_SESSIONS_PER_CHECKIN = 128

/**
 * Longest a session waits for its check-in (ms): the controller holds one at most 300 s, and Discord
 * keeps a session resumable only minutes, so an older one would only make the new owner's RESUME fail.
 */
export const MAX_SESSION_WAIT_MS = 300_000

/** Why sessions were not deposited. */
export type SessionDropReason = 'invalid' | 'not_a_plan_move' | 'over_limit' | 'given_back' | 'expired'

interface Held {
  readonly session: ResumableSession
  /** The generation of the plan that moved the shard away: only a check-in reporting it releases the handoff. */
  readonly generation: number
  readonly keptAt: number
}

/** The entries of one check-in, to settle once its answer is known. */
export interface DepositBatch {
  readonly entries: readonly SessionEntry[]
  readonly held: ReadonlyMap<number, Held>
}

/** What the deposits need from the agent. */
export interface SessionDepositsDeps {
  readonly clock: AgentClock
  dropped(reason: SessionDropReason, shardIds: readonly number[], detail: string): void
}

const EMPTY: DepositBatch = { entries: [], held: new Map() }

/** The held sessions; see the module comment. */
export class SessionDeposits {
  private readonly held = new Map<number, Held>()

  constructor(private readonly deps: SessionDepositsDeps) {}

  /** Keeps what `onStop` returned for a shard the plan of `generation` moved away; an invalid value is dropped. */
  keep(shardId: number, value: unknown, generation: number): void {
    const parsed = parseHostSession(value)
    if ('problem' in parsed) {
      this.held.delete(shardId)
      this.deps.dropped('invalid', [shardId], `onStop returned a session that is not valid: ${parsed.problem}`)
      return
    }
    this.held.set(shardId, { session: parsed.session, generation, keptAt: this.deps.clock.now() })
  }

  /** Shards with a session held. */
  get shards(): number[] {
    return [...this.held.keys()].sort((a, b) => a - b)
  }

  /**
   * The entries for a check-in reporting `reported`, while the accepted plan assigns `assigned`. Sessions
   * of shards the plan gave back, too old, or beyond the 128 an answer may carry are dropped here.
   */
  batchFor(reported: number | null, assigned: readonly number[]): DepositBatch {
    if (this.held.size === 0) return EMPTY
    this.prune(assigned)
    if (reported === null) return EMPTY
    const due = [...this.held].filter(([, held]) => held.generation <= reported).sort(([a], [b]) => a - b)
    const over = due.splice(MAX_SESSIONS_PER_CHECKIN)
    if (over.length > 0) this.dropWhere('over_limit', (id) => over.some(([o]) => o === id), `a check-in carries at most ${MAX_SESSIONS_PER_CHECKIN} sessions`)
    const entries = due.map(([shardId, { session }]) => ({ shard_id: shardId, session_id: session.sessionId, sequence: session.sequence, resume_url: session.resumeUrl }))
    return { entries, held: new Map(due) }
  }

  /** Drops the sessions no check-in may carry any more: of shards the plan (assigning `assigned`) gave back, and too old. */
  prune(assigned: readonly number[]): void {
    const now = this.deps.clock.now()
    const mine = new Set(assigned)
    this.dropWhere('given_back', (id) => mine.has(id), 'the plan gave the shard back to this node before its session was deposited')
    this.dropWhere('expired', (_id, held) => now - held.keptAt > MAX_SESSION_WAIT_MS, `no check-in could deposit the session within ${MAX_SESSION_WAIT_MS / 1000} s`)
  }

  /** The check-in carrying `batch` was answered (accepted or refused): its sessions are done with. */
  settle(batch: DepositBatch): void {
    // A shard moved again meanwhile holds a newer session: that one stays.
    for (const [shardId, held] of batch.held) if (this.held.get(shardId) === held) this.held.delete(shardId)
  }

  private dropWhere(reason: SessionDropReason, test: (shardId: number, held: Held) => boolean, detail: string): void {
    const ids = [...this.held].filter(([id, held]) => test(id, held)).map(([id]) => id)
    if (ids.length === 0) return
    for (const id of ids) this.held.delete(id)
    this.deps.dropped(reason, ids.sort((a, b) => a - b), detail)
  }
}
