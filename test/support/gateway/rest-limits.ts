/**
 * Discord's three REST limits (developers/topics/rate-limits.mdx), pure: the caller passes the time in
 * milliseconds on one monotonic clock.
 * - the global limit: N requests per second per bot;
 * - per-route buckets: `limit` requests per window, per route and major parameter value;
 * - the invalid request limit: a client that meets `limit` invalid answers within a sliding window is
 *   refused everything for `banMs`.
 */
import type { BucketLimit } from './rest-options.js'

/** A refusal: how long until the same request would pass. */
export interface Refusal {
  readonly ok: false
  readonly retryAfterMs: number
}

/**
 * The global limit. Discord says "50 requests per second" and not how the second is aligned, so this
 * takes the strictest reading, a sliding window: at most `perSecond` admitted requests in ANY 1000 ms
 * (a request at `now` is admitted iff fewer than `perSecond` were admitted after `now - 1000`). Refused
 * requests are not counted, so `retryAfterMs` is exact: when the oldest admitted one leaves the window.
 */
export class GlobalWindow {
  static readonly WINDOW_MS = 1000
  // Times of the admitted requests still in the window, oldest first.
  private readonly admitted: number[] = []

  constructor(private readonly perSecond: number) {}

  take(now: number): { readonly ok: true } | Refusal {
    while (this.admitted.length > 0 && (this.admitted[0] as number) <= now - GlobalWindow.WINDOW_MS) this.admitted.shift()
    if (this.admitted.length < this.perSecond) {
      this.admitted.push(now)
      return { ok: true }
    }
    const leaves = this.admitted[this.admitted.length - this.perSecond] as number
    return { ok: false, retryAfterMs: leaves + GlobalWindow.WINDOW_MS - now }
  }
}

/** A bucket's state after a request, for the X-RateLimit-* headers. */
export interface BucketAnswer {
  readonly ok: boolean
  readonly limit: number
  readonly remaining: number
  /** When the bucket refills, on the caller's clock. */
  readonly resetAt: number
}

/**
 * Per-route buckets. A window starts with the first request after the previous one ended (Discord's
 * X-RateLimit-Reset is a fixed point, not a sliding one); a refused request does not spend anything.
 */
export class RouteBuckets {
  private readonly buckets = new Map<string, { remaining: number; resetAt: number }>()

  take(key: string, bucket: BucketLimit, now: number): BucketAnswer {
    let state = this.buckets.get(key)
    if (!state || now >= state.resetAt) {
      state = { remaining: bucket.limit, resetAt: now + bucket.windowMs }
      this.buckets.set(key, state)
    }
    if (state.remaining === 0) return { ok: false, limit: bucket.limit, remaining: 0, resetAt: state.resetAt }
    state.remaining--
    return { ok: true, limit: bucket.limit, remaining: state.remaining, resetAt: state.resetAt }
  }
}

/** One ban. */
export interface Ban {
  readonly client: string
  readonly at: number
  readonly until: number
}

/**
 * Invalid answers per client and the bans they lead to. A ban clears the client's count: counting
 * starts afresh when it ends (at Discord's values, a 10-minute window and a one-hour ban, nothing of
 * the old count would be left anyway; with scaled-down values a test sees one ban per `limit`).
 */
export class InvalidLedger {
  private readonly recent = new Map<string, number[]>()
  private readonly totals = new Map<string, number>()
  readonly bans: Ban[] = []

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly banMs: number,
  ) {}

  /** The ban a client is under at `now`, or null. */
  banOf(client: string, now: number): Ban | null {
    for (let i = this.bans.length - 1; i >= 0; i--) {
      const ban = this.bans[i] as Ban
      if (ban.client === client) return now < ban.until ? ban : null
    }
    return null
  }

  /** Counts one invalid answer; returns the ban it started, if it was the `limit`-th in the window. */
  count(client: string, now: number): Ban | null {
    this.totals.set(client, (this.totals.get(client) ?? 0) + 1)
    const times = this.prune(client, now)
    times.push(now)
    if (times.length < this.limit) return null
    this.recent.delete(client)
    const ban = { client, at: now, until: now + this.banMs }
    this.bans.push(ban)
    return ban
  }

  /** How many invalid answers a client met in the window ending at `now`. */
  inWindow(client: string, now: number): number {
    return this.prune(client, now).length
  }

  /** Every client's invalid answers since the start. */
  totalsByClient(): Record<string, number> {
    return Object.fromEntries(this.totals)
  }

  /** Every client with invalid answers in the window ending at `now`. */
  inWindowByClient(now: number): Record<string, number> {
    const counts: Record<string, number> = {}
    for (const client of this.recent.keys()) {
      const n = this.inWindow(client, now)
      if (n > 0) counts[client] = n
    }
    return counts
  }

  /** The clients banned at `now`. */
  bannedAt(now: number): string[] {
    return [...new Set(this.bans.filter((b) => now < b.until).map((b) => b.client))]
  }

  private prune(client: string, now: number): number[] {
    const times = this.recent.get(client) ?? []
    while (times.length > 0 && (times[0] as number) <= now - this.windowMs) times.shift()
    this.recent.set(client, times)
    return times
  }
}
