/**
 * The checks a check-in's `sessions` must pass before anything changes (SPEC "Session handoff"): each
 * entry names a shard the plan took from this very node and that this very check-in releases, and a
 * resume URL the operator's allowed hosts admit. One bad entry refuses the whole check-in: a partial
 * deposit would leave the node unsure which sessions travel, and a hostile entry is an attack to see
 * whole, not to trim.
 */
import { AppError } from '../errors.js'
import type { HandoffLedger } from './handoffs.js'
import { resumeUrlProblem } from './resume-url.js'
import type { SessionEntry } from './schemas.js'

/** Which rule a refused deposit broke (for the audit line; never the deposited values). */
export type DepositRule = 'shard_range' | 'duplicate_shard' | 'not_released_by_node' | 'not_released_by_checkin' | 'resume_url'

/** A check-in refused for its `sessions` (400 invalid_request), carrying what the audit records. */
export class DepositRefused extends AppError {
  constructor(
    readonly rule: DepositRule,
    readonly shardId: number,
    message: string,
  ) {
    // The shard is named in the body too, so that a node can send the rest of its deposit again
    // (an entry goes stale when the shard came back to it by a later plan before the release arrived).
    super('invalid_request', message, { refused_shard_id: shardId })
  }
}

/** What the checks read: this node's handoff ID (undefined when it has none) and the ledger. */
export interface DepositContext {
  readonly nodeIndexId: number | undefined
  readonly reportedGeneration: number | undefined
  readonly totalShards: number
  readonly handoffs: Pick<HandoffLedger, 'fromOf' | 'generationOf'>
  readonly allowedHosts: readonly string[]
  /**
   * Handoffs at or below this generation wait for a revoked holder of this node's name (another process:
   * see core/revoked-holders.ts), not for this check-in; absent: none.
   */
  readonly revokedUpTo?: number
  /**
   * A leaving check-in (SPEC "Leaving on purpose"): the node stopped every shard, so it may also deposit
   * the sessions of the shards it owns now (the leave moves them); absent: not leaving.
   */
  readonly ownsNow?: (shardId: number) => boolean
}

/** Throws DepositRefused naming the first entry that breaks a rule; returns when every entry passes. */
export function assertDepositAccepted(sessions: readonly SessionEntry[], ctx: DepositContext): void {
  const seen = new Set<number>()
  sessions.forEach((entry, i) => {
    const at = `sessions[${i}]`
    const shardId = entry.shard_id
    if (shardId >= ctx.totalShards) throw new DepositRefused('shard_range', shardId, `${at}.shard_id must be below total_shards (${ctx.totalShards})`)
    if (seen.has(shardId)) throw new DepositRefused('duplicate_shard', shardId, `${at}: shard ${shardId} is listed twice`)
    seen.add(shardId)
    if (ctx.ownsNow?.(shardId) === true) {
      const owned = resumeUrlProblem(entry.resume_url, ctx.allowedHosts)
      if (owned !== null) throw new DepositRefused('resume_url', shardId, `${at}.resume_url ${owned}`)
      return
    }
    if (ctx.nodeIndexId === undefined || ctx.handoffs.fromOf(shardId) !== ctx.nodeIndexId) {
      throw new DepositRefused(
        'not_released_by_node',
        shardId,
        `${at}: shard ${shardId} has no pending handoff from this node (a session is deposited only for a shard the plan took from it)`,
      )
    }
    const movedAt = ctx.handoffs.generationOf(shardId)
    if (ctx.revokedUpTo !== undefined && movedAt <= ctx.revokedUpTo) {
      throw new DepositRefused('not_released_by_node', shardId, `${at}: shard ${shardId} was taken from a revoked certificate of this node, not from this one`)
    }
    if (ctx.reportedGeneration === undefined || ctx.reportedGeneration < movedAt) {
      throw new DepositRefused(
        'not_released_by_checkin',
        shardId,
        `${at}: this check-in does not release shard ${shardId} (a deposit goes with the check-in that reports generation ${movedAt} or later)`,
      )
    }
    const problem = resumeUrlProblem(entry.resume_url, ctx.allowedHosts)
    if (problem !== null) throw new DepositRefused('resume_url', shardId, `${at}.resume_url ${problem}`)
  })
}
