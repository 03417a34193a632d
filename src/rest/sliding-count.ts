/**
 * Events counted in buckets (one second by default) over a sliding window (the invalid-request window of 10 minutes,
 * the demand of the last check-in interval). Memory is bounded by the window's bucket count, whatever
 * the event rate. An event leaves the window up to one bucket late: the count errs high, the safe side
 * for a budget.
 */
export const BUCKET_MS = 1000

export class SlidingCount {
  /** Non-empty buckets, oldest first: [bucket index, events]. */
  private buckets: [number, number][] = []
  private total = 0

  /**
   * `windowMs`: how far back events count (and are kept); `bucketMs`: the resolution, by which a count errs
   * high at most (a second for the invalid-request budget; a demand over a check-in window of a few seconds
   * wants finer buckets: whole seconds counted a 3 s window as up to 4 s of arrivals).
   */
  constructor(
    readonly windowMs: number,
    readonly bucketMs = BUCKET_MS,
  ) {}

  /** Counts `n` events at `now` (monotonic ms). */
  add(now: number, n = 1): void {
    const index = Math.floor(now / this.bucketMs)
    const last = this.buckets.at(-1)
    if (last !== undefined && last[0] === index) last[1] += n
    else this.buckets.push([index, n])
    this.total += n
    this.prune(now)
  }

  /** Events in the window ending at `now`; with `windowMs`, only the last windowMs of it (at most the whole window). */
  count(now: number, windowMs = this.windowMs): number {
    this.prune(now)
    if (windowMs >= this.windowMs) return this.total
    const from = Math.floor((now - windowMs) / this.bucketMs)
    let n = 0
    for (const [index, events] of this.buckets) if (index >= from) n += events
    return n
  }

  /** Milliseconds from `now` until fewer than `limit` events remain in the window (0 when already so). */
  msUntilBelow(limit: number, now: number): number {
    this.prune(now)
    let excess = this.total - limit + 1
    if (excess <= 0) return 0
    for (const [index, events] of this.buckets) {
      excess -= events
      if (excess <= 0) return Math.max(0, this.expiresAt(index) - now)
    }
    return this.windowMs
  }

  /** When a bucket's events stop counting. */
  private expiresAt(index: number): number {
    return (index + 1) * this.bucketMs + this.windowMs
  }

  private prune(now: number): void {
    while (this.buckets.length > 0 && this.expiresAt(this.buckets[0]![0]) <= now) this.total -= this.buckets.shift()![1]
  }
}
