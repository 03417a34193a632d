/**
 * Discord's two IDENTIFY limits (developers/events/gateway.mdx, "Identifying", "Max Concurrency",
 * "Session Start Limit Object"): at most one IDENTIFY per bucket `shard_id % max_concurrency` per
 * window (5 s), across every connection of the application; and `session_start_limit.remaining`
 * session starts until `reset_after`. Pure: the caller passes the time.
 */

const DAY_MS = 86_400_000

/** Why an IDENTIFY may not start a session now. */
export type IdentifyVerdict =
  | { readonly ok: true }
  | { readonly ok: false; readonly reason: 'bucket'; readonly previousAt: number }
  | { readonly ok: false; readonly reason: 'limit' }

/** The bucket windows and the session start budget. */
export class IdentifyGate {
  // When each bucket's latest accepted IDENTIFY arrived.
  private readonly lastAccepted = new Map<number, number>()
  private remaining: number
  private resetAt: number

  constructor(
    private readonly maxConcurrency: number,
    private readonly windowMs: number,
    private readonly total: number,
    remaining: number,
    resetAfter: number,
    now: number,
  ) {
    this.remaining = remaining
    this.resetAt = now + resetAfter
  }

  bucketOf(shardId: number): number {
    return shardId % this.maxConcurrency
  }

  /**
   * Whether an IDENTIFY arriving now may start a session. The bucket is judged first: a refused
   * IDENTIFY never started a session, so it neither spends the budget nor restarts the window.
   */
  check(shardId: number, now: number): IdentifyVerdict {
    this.refill(now)
    const previousAt = this.lastAccepted.get(this.bucketOf(shardId))
    if (previousAt !== undefined && now - previousAt < this.windowMs) return { ok: false, reason: 'bucket', previousAt }
    if (this.remaining <= 0) return { ok: false, reason: 'limit' }
    return { ok: true }
  }

  /** Records a session start: the bucket's window begins now and one start is spent. */
  accept(shardId: number, now: number): void {
    this.lastAccepted.set(this.bucketOf(shardId), now)
    this.remaining--
  }

  /** `session_start_limit` as GET /gateway/bot reports it now. */
  limit(now: number): { total: number; remaining: number; reset_after: number; max_concurrency: number } {
    this.refill(now)
    return {
      total: this.total,
      remaining: this.remaining,
      reset_after: Math.max(0, this.resetAt - now),
      max_concurrency: this.maxConcurrency,
    }
  }

  private refill(now: number): void {
    if (now < this.resetAt) return
    this.remaining = this.total
    this.resetAt = now + DAY_MS
  }
}
