/**
 * Test helper: records a CrlWatcher's callbacks and lets a test await the next one of a kind.
 */
import type { ParsedCrl } from '../../src/identity/crl.js'
import type { CrlRefusalDetails, CrlRefusalReason, CrlWatcherOptions } from '../../src/identity/crl-watcher.js'

/** One callback the watcher made. */
export type WatcherEvent =
  | { kind: 'loaded'; crl: ParsedCrl }
  | { kind: 'refused'; reason: CrlRefusalReason; details: CrlRefusalDetails }
  | { kind: 'expiring'; crl: ParsedCrl; msLeft: number }
  | { kind: 'pending'; crl: ParsedCrl }

/** Collects events; `next` resolves with the first unseen event of a kind or rejects after `timeoutMs`. */
export class EventLog {
  readonly events: WatcherEvent[] = []
  private seen = 0
  private waiters: (() => void)[] = []

  /** The callbacks to spread into `CrlWatcherOptions`. */
  callbacks(): Pick<CrlWatcherOptions, 'onLoaded' | 'onRefused' | 'onExpiring' | 'onPending'> {
    return {
      onLoaded: (crl) => this.push({ kind: 'loaded', crl }),
      onRefused: (reason, details) => this.push({ kind: 'refused', reason, details }),
      onExpiring: (crl, msLeft) => this.push({ kind: 'expiring', crl, msLeft }),
      onPending: (crl) => this.push({ kind: 'pending', crl }),
    }
  }

  /** Events recorded since the last `next`/`drain`. */
  drain(): WatcherEvent[] {
    const out = this.events.slice(this.seen)
    this.seen = this.events.length
    return out
  }

  /** Waits for the next event (of any kind) after those already consumed. */
  async next(timeoutMs: number): Promise<WatcherEvent> {
    const deadline = Date.now() + timeoutMs
    while (this.seen >= this.events.length) {
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`no watcher event within ${timeoutMs} ms`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
    return this.events[this.seen++] as WatcherEvent
  }

  private push(event: WatcherEvent): void {
    this.events.push(event)
    const waiters = this.waiters
    this.waiters = []
    for (const w of waiters) w()
  }
}
