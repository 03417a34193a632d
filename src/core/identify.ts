/**
 * Identify pacing (SPEC "Identify claims"): one grant per bucket per interval across all nodes, and
 * the optional rolling 24-hour budget. Pure: the clock is a parameter.
 */

/** Length of the rolling daily Identify window. */
export const DAILY_WINDOW_MS = 86_400_000

/** Why a claim may not be granted yet, and for how long. */
export interface IdentifyWait {
  readonly reason: 'bucket_busy' | 'daily_limit'
  readonly retryAfterMs: number
}

/** The rolling daily Identify budget as the operator sees it (times in ms). */
export interface DailyBudget {
  readonly dailyLimit: number
  readonly used24h: number
  readonly remaining: number
  /** When the oldest grant in the window stops counting, or null when none counts. */
  readonly nextReleaseAt: number | null
}

/**
 * Bucket grant times and daily grants; `check` never records, `record` is called only on a grant.
 *
 * A bucket's interval counts from the later of the grant and the moment its answer was released to the
 * node (`released`): an answer that waits for a durable write reaches the node, which IDENTIFYs at once,
 * that much later, and Discord counts its 5 s between the IDENTIFYs it receives. Until the release the
 * bucket is busy for a whole interval.
 */
export class IdentifyLimiter {
  private readonly lastGrant = new Map<number, number>()
  /** Buckets whose latest grant's answer has not been released yet. */
  private readonly unreleased = new Set<number>()
  private readonly daily: number[]
  private dailyHead = 0

  /**
   * @param busySince every bucket counts as granted at this time (a restore), or null.
   * @param dailyGrants grant times restored from a snapshot, in any order.
   */
  constructor(
    private readonly maxConcurrency: number,
    private readonly intervalMs: number,
    private readonly dailyLimit: number | null,
    private readonly busySince: number | null = null,
    dailyGrants: readonly number[] = [],
  ) {
    this.daily = [...dailyGrants].sort((a, b) => a - b)
  }

  /** The bucket of a shard, as Discord computes it. */
  bucketOf(shardId: number): number {
    return shardId % this.maxConcurrency
  }

  /** Null when a claim for `shardId` may be granted at `now`, else the reason and exact wait. */
  check(now: number, shardId: number): IdentifyWait | null {
    if (this.dailyLimit !== null) {
      this.pruneDaily(now)
      if (this.dailyCount() >= this.dailyLimit) {
        const oldest = this.daily[this.dailyHead]!
        return { reason: 'daily_limit', retryAfterMs: oldest + DAILY_WINDOW_MS - now }
      }
    }
    const bucket = this.bucketOf(shardId)
    // The release comes later than now, so the next grant can be no earlier than a whole interval away.
    if (this.unreleased.has(bucket)) return { reason: 'bucket_busy', retryAfterMs: this.intervalMs }
    const last = this.lastGrant.get(bucket) ?? this.busySince
    if (last !== null && now - last < this.intervalMs) {
      return { reason: 'bucket_busy', retryAfterMs: last + this.intervalMs - now }
    }
    return null
  }

  /** Records a grant at `now`; returns its bucket, busy until `released` is called for it. */
  record(now: number, shardId: number): number {
    const bucket = this.bucketOf(shardId)
    this.lastGrant.set(bucket, now)
    this.unreleased.add(bucket)
    if (this.dailyLimit !== null) this.daily.push(now)
    return bucket
  }

  /**
   * The answer of the bucket's latest grant left (or failed) at `now`: the interval counts from here.
   * A release with no grant waiting is ignored (a second call, or a bucket that took no grant).
   */
  released(now: number, bucket: number): void {
    if (!this.unreleased.delete(bucket)) return
    this.lastGrant.set(bucket, Math.max(this.lastGrant.get(bucket) ?? now, now))
  }

  /** Grants left in the rolling daily budget at `now`, or null without a budget. */
  remaining(now: number): number | null {
    if (this.dailyLimit === null) return null
    this.pruneDaily(now)
    return Math.max(0, this.dailyLimit - this.dailyCount())
  }

  /**
   * The daily budget at `now` for the operator's view: the limit, grants in the last 24 h, what is left,
   * and when the oldest of those grants leaves the window (the next grant to come back); null without a budget.
   */
  budget(now: number): DailyBudget | null {
    if (this.dailyLimit === null) return null
    this.pruneDaily(now)
    const used = this.dailyCount()
    const oldest = this.daily[this.dailyHead]
    return {
      dailyLimit: this.dailyLimit,
      used24h: used,
      remaining: Math.max(0, this.dailyLimit - used),
      nextReleaseAt: oldest === undefined ? null : oldest + DAILY_WINDOW_MS,
    }
  }

  /** Grant times counted against the daily budget, oldest first (for snapshots; pruned lazily). */
  dailyGrants(): number[] {
    return this.daily.slice(this.dailyHead)
  }

  /** True when grants are counted against a daily budget (so a grant changes the snapshot). */
  get countsDaily(): boolean {
    return this.dailyLimit !== null
  }

  private dailyCount(): number {
    return this.daily.length - this.dailyHead
  }

  // A grant at t counts while now < t + 24 h; dropping from the head keeps this amortized O(1).
  private pruneDaily(now: number): void {
    while (this.dailyHead < this.daily.length && now - this.daily[this.dailyHead]! >= DAILY_WINDOW_MS) {
      this.dailyHead += 1
    }
    if (this.dailyHead > 1024 && this.dailyHead * 2 > this.daily.length) {
      this.daily.splice(0, this.dailyHead)
      this.dailyHead = 0
    }
  }
}
