/**
 * Per-principal token buckets (SPEC "Rate limits"): each certificate serial gets `burst` tokens that
 * refill at `perSecond`; a request takes one. Pure apart from the injected clock. Memory stays bounded
 * by the number of principals that were active lately: a bucket that has refilled completely is the same
 * as no bucket, so such buckets are dropped once the map grows.
 */
import type { RateLimit } from '../config.js'

interface Bucket {
  tokens: number
  at: number // ms of the last refill
}

/** A refusal: how long until one token is back. */
export interface RateLimited {
  readonly retryAfterMs: number
}

const DEFAULT_PRUNE_ABOVE = 4096

/** Token buckets keyed by principal, one configuration per role. */
export class PrincipalRateLimiter<Role extends string> {
  private readonly buckets = new Map<string, Bucket>()
  private pruneAt: number

  /** @param pruneAbove the map size at which full buckets are first dropped */
  constructor(
    private readonly limits: Readonly<Record<Role, RateLimit>>,
    private readonly now: () => number,
    private readonly pruneAbove = DEFAULT_PRUNE_ABOVE,
  ) {
    this.pruneAt = pruneAbove
  }

  /** Takes a token for `key` (a certificate serial) of `role`; null when allowed, else the wait. */
  take(role: Role, key: string): RateLimited | null {
    const { perSecond, burst } = this.limits[role]
    const now = this.now()
    const id = `${role}:${key}`
    let bucket = this.buckets.get(id)
    if (bucket === undefined) {
      if (this.buckets.size >= this.pruneAt) this.prune(now) // before inserting: a new bucket is full
      bucket = { tokens: burst, at: now }
      this.buckets.set(id, bucket)
    } else {
      bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) * perSecond) / 1000)
      bucket.at = now
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1
      return null
    }
    // The epsilon keeps float dust (0.9999999) from adding a millisecond.
    return { retryAfterMs: Math.max(1, Math.ceil(((1 - bucket.tokens) * 1000) / perSecond - 1e-6)) }
  }

  /** Principals with a bucket in memory (for tests). */
  get tracked(): number {
    return this.buckets.size
  }

  // Drops buckets that are full again; if most are busy, the next prune waits until the map doubles.
  private prune(now: number): void {
    for (const [id, bucket] of this.buckets) {
      const role = id.slice(0, id.indexOf(':')) as Role
      const { perSecond, burst } = this.limits[role]
      if (bucket.tokens + ((now - bucket.at) * perSecond) / 1000 >= burst) this.buckets.delete(id)
    }
    this.pruneAt = Math.max(this.pruneAbove, this.buckets.size * 2)
  }
}
