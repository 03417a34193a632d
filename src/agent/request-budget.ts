/**
 * A token bucket for the agent's own requests, so that a node stays well inside the controller's
 * per-certificate limit (SPEC "Rate limits": 5 a second, burst 20) even while it claims many shards.
 * Check-ins always go (they renew the lease) but still spend a token, so claims slow down around them.
 */

/** Default pace of one agent: under the controller's default node limit with room to spare. */
export const DEFAULT_REQUEST_BUDGET = { perSecond: 3, burst: 8 } as const

/** Tokens refill continuously at `perSecond`, up to `burst`. */
export class RequestBudget {
  private tokens: number
  private last: number

  constructor(private readonly perSecond: number, private readonly burst: number, private readonly now: () => number) {
    if (!(perSecond > 0) || !(burst >= 1)) throw new RangeError('a request budget needs perSecond > 0 and burst >= 1')
    this.tokens = burst
    this.last = now()
  }

  /** Takes a token and returns 0, or returns the milliseconds until one is available (taking nothing). */
  take(): number {
    this.refill()
    if (this.tokens >= 1) {
      this.tokens -= 1
      return 0
    }
    return Math.ceil(((1 - this.tokens) / this.perSecond) * 1000)
  }

  /** Spends a token even when none is left (bounded debt): for requests that must not wait. */
  spend(): void {
    this.refill()
    this.tokens = Math.max(this.tokens - 1, -this.burst)
  }

  private refill(): void {
    const now = this.now()
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.perSecond)
    this.last = now
  }
}
