/**
 * A per-key fixed-window limiter for noisy audit events (rejected TLS handshakes), pure: the clock is a
 * parameter. Each key may log `maxPerWindow` lines per window starting at its first event; the rest are
 * counted and reported once as a summary after the window ends. Memory and output stay bounded under a
 * flood from many addresses: past `maxKeys` distinct keys, new keys share one overflow key.
 */

/** The key that absorbs events once `maxKeys` keys are being tracked. */
export const OVERFLOW_KEY = '*'

/** Settings of a WindowRateLimiter. */
export interface RateLimiterOptions {
  readonly maxPerWindow: number // lines allowed per key per window, >= 0
  readonly windowMs: number // > 0
  readonly maxKeys: number // keys tracked at once before falling back to OVERFLOW_KEY, >= 1
}

/** Events of one key that were not logged during one or more ended windows. */
export interface SuppressedSummary {
  readonly key: string
  readonly count: number
  readonly since: number // start of the first window with suppressed events
  readonly until: number // end of the last such window
}

interface Window {
  start: number
  allowed: number
  suppressed: number
}

/** Counts events per key and window; see the module comment. */
export class WindowRateLimiter {
  private readonly windows = new Map<string, Window>()
  private readonly pending = new Map<string, SuppressedSummary>()

  constructor(private readonly opts: RateLimiterOptions) {
    if (!(opts.windowMs > 0) || !(opts.maxPerWindow >= 0) || !(opts.maxKeys >= 1)) {
      throw new RangeError('rate limiter needs windowMs > 0, maxPerWindow >= 0 and maxKeys >= 1')
    }
  }

  /** True if an event for `key` at `now` may be logged; false if it is only counted. */
  allow(now: number, key: string): boolean {
    let w = this.windows.get(key)
    if (w !== undefined && now >= w.start + this.opts.windowMs) {
      this.retire(key, w)
      w = undefined
    }
    if (w === undefined) {
      if (key !== OVERFLOW_KEY && this.windows.size >= this.opts.maxKeys) return this.allow(now, OVERFLOW_KEY)
      w = { start: now, allowed: 0, suppressed: 0 }
      this.windows.set(key, w)
    }
    if (w.allowed < this.opts.maxPerWindow) {
      w.allowed++
      return true
    }
    w.suppressed++
    return false
  }

  /** Summaries of every window ended by `now` that suppressed events (each reported once); frees ended windows. */
  takeSuppressed(now: number): SuppressedSummary[] {
    for (const [key, w] of this.windows) {
      if (now >= w.start + this.opts.windowMs) this.retire(key, w)
    }
    const out = [...this.pending.values()]
    this.pending.clear()
    return out
  }

  /** Number of keys with an open window (for tests and metrics). */
  get trackedKeys(): number {
    return this.windows.size
  }

  private retire(windowKey: string, w: Window): void {
    this.windows.delete(windowKey)
    if (w.suppressed === 0) return
    const until = w.start + this.opts.windowMs
    // merged per key (and past maxKeys into the overflow key), so pending summaries stay bounded
    // even if takeSuppressed is called rarely
    const full = !this.pending.has(windowKey) && this.pending.size >= this.opts.maxKeys
    const key = full ? OVERFLOW_KEY : windowKey
    const earlier = this.pending.get(key)
    this.pending.set(key, {
      key,
      count: (earlier?.count ?? 0) + w.suppressed,
      since: earlier?.since ?? w.start,
      until,
    })
  }
}
