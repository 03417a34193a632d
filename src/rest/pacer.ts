/**
 * Paces every request the proxy sends to Discord at the node's share: one request per 1/q seconds
 * (a token bucket of capacity 1 filled at q per second). The next request may go 1/q after the LAST ONE
 * SENT, never after when it was due: a timer that fires late, or a share that was 0 for a while, gives
 * no catch-up burst. A lowered share spaces the next request from the last send at the new rate at
 * once. While the share is 0 or has run out, requests wait (first come, first served) until a share
 * comes or their signal aborts.
 */
import type { RestClock } from './rest-clock.js'
import { shareInForce, type RestShare } from './share.js'

/**
 * Milliseconds until the next request may go (0: now), or null while no share is in force.
 * Pure: the pacer's whole rule.
 */
export function paceDelay(now: number, lastSentAt: number | null, share: RestShare | null): number | null {
  const inForce = shareInForce(share, now)
  if (inForce === null || !(inForce.perSecond > 0)) return null
  if (lastSentAt === null) return 0
  return Math.max(0, lastSentAt + 1000 / inForce.perSecond - now)
}

/** Raised when a waiting request's signal aborts: named AbortError, as fetch names it. */
function abortError(): Error {
  const err = new Error('the request was given up while it waited for the REST share')
  err.name = 'AbortError'
  return err
}

interface Waiter {
  readonly resolve: () => void
  readonly reject: (err: Error) => void
  readonly signal: AbortSignal | undefined
  readonly onAbort: () => void
}

/** The pacer of one proxy; see the module comment. */
export class SharePacer {
  private share: RestShare | null = null
  private lastSentAt: number | null = null
  private readonly queue: Waiter[] = []
  private timer: unknown = null

  constructor(private readonly clock: RestClock) {}

  /** Replaces the share (null: none); waiting requests go as the new share allows. */
  setShare(share: RestShare | null): void {
    this.share = share
    this.pump()
  }

  /** The share in force now, or null. */
  current(): RestShare | null {
    return shareInForce(this.share, this.clock.now())
  }

  /** Requests waiting for their turn. */
  get waiting(): number {
    return this.queue.length
  }

  /** Resolves when this request may be sent (counted as sent at that moment); rejects with AbortError if `signal` aborts first. */
  acquire(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortError())
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          const at = this.queue.indexOf(waiter)
          if (at >= 0) this.queue.splice(at, 1)
          reject(abortError())
          this.pump()
        },
      }
      signal?.addEventListener('abort', waiter.onAbort, { once: true })
      this.queue.push(waiter)
      this.pump()
    })
  }

  /** Grants what may go now, then sleeps until the next one may (no timer while no share is in force). */
  private pump(): void {
    if (this.timer !== null) {
      this.clock.clearTimeout(this.timer)
      this.timer = null
    }
    while (this.queue.length > 0) {
      const now = this.clock.now()
      const delay = paceDelay(now, this.lastSentAt, this.share)
      if (delay === null) return // woken by setShare
      if (delay > 0) {
        // whole milliseconds, never early: a timer that fires a fraction early is simply re-armed
        this.timer = this.clock.setTimeout(() => {
          this.timer = null
          this.pump()
        }, Math.ceil(delay))
        return
      }
      const waiter = this.queue.shift()!
      this.lastSentAt = now
      waiter.signal?.removeEventListener('abort', waiter.onAbort)
      waiter.resolve()
    }
  }

  /** Rejects every waiter and stops the timer (the proxy closes). */
  close(): void {
    if (this.timer !== null) this.clock.clearTimeout(this.timer)
    this.timer = null
    for (const waiter of this.queue.splice(0)) {
      waiter.signal?.removeEventListener('abort', waiter.onAbort)
      waiter.reject(abortError())
    }
  }
}
