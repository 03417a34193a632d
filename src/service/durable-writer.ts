/**
 * Makes the controller's state durable: one write at a time, always of the latest state, and answers
 * wait for the write that covers their change (so no node is shown a generation a crash could take back).
 *
 * A failed write never wedges the controller: it is retried with the latest state (exponential backoff),
 * every answer waiting for it gets 503 `unavailable` (never a 500), new work is refused with 503 while no
 * write has succeeded since, and the first successful write heals everything.
 */
import { AppError } from '../errors.js'

export interface DurableWriterOptions {
  /** Persists the latest state (taken at call time); resolves once it is durable. */
  readonly write: () => Promise<void>
  /** Called on each failed write, with how many failed in a row. */
  readonly onFailure?: (err: Error, consecutive: number) => void
  /** Called on the first successful write after failures. */
  readonly onRecovered?: (failedWrites: number) => void
  /** First retry delay after a failure (doubles up to `retryMaxMs`). */
  readonly retryMinMs?: number
  readonly retryMaxMs?: number
}

interface Waiter {
  readonly version: number
  resolve(): void
  reject(err: unknown): void
}

const UNAVAILABLE_MESSAGE = 'the controller cannot make its state durable right now; retry shortly'

/** Tracks requested vs durable state versions and drives the writes (see the module comment). */
export class DurableWriter {
  private requested = 0
  private durable = 0
  private running: Promise<void> | null = null
  private failures = 0
  private lastError: Error | null = null
  private retryTimer: NodeJS.Timeout | undefined
  private waiters: Waiter[] = []
  private stopped = false

  constructor(private readonly opts: DurableWriterOptions) {}

  /** True while the last write failed and none succeeded since. */
  get failing(): boolean {
    return this.lastError !== null
  }

  /** The error of the last failed write while failing (for readiness reasons), else null. */
  get failure(): Error | null {
    return this.lastError
  }

  /** Throws 503 `unavailable` while failing: work that could change state must not start. */
  assertAvailable(): void {
    if (this.lastError !== null) throw new AppError('unavailable', UNAVAILABLE_MESSAGE)
  }

  /** The state moved: make it durable (coalesced with any write already under way). */
  changed(): void {
    this.requested += 1
    if (this.lastError === null) this.kick()
  }

  /** Resolves once every change made so far is durable; rejects with 503 if the write covering it fails. */
  whenDurable(): Promise<void> {
    if (this.durable >= this.requested) return Promise.resolve()
    if (this.lastError !== null) return Promise.reject(new AppError('unavailable', UNAVAILABLE_MESSAGE))
    return new Promise((resolve, reject) => this.waiters.push({ version: this.requested, resolve, reject }))
  }

  /** At stop: no more retries; writes the latest state once more (always) and throws if that fails. */
  async flushFinal(): Promise<void> {
    this.stopped = true
    clearTimeout(this.retryTimer)
    await this.running
    await this.opts.write()
    this.durable = this.requested
    this.lastError = null
  }

  private kick(): void {
    if (this.running === null && !this.stopped) this.running = this.loop().finally(() => (this.running = null))
  }

  private async loop(): Promise<void> {
    while (this.durable < this.requested && !this.stopped) {
      const version = this.requested // write() snapshots at least this much
      try {
        await this.opts.write()
      } catch (err) {
        this.fail(err instanceof Error ? err : new Error(String(err)))
        return
      }
      this.durable = version
      if (this.lastError !== null) {
        const failed = this.failures
        this.lastError = null
        this.failures = 0
        this.opts.onRecovered?.(failed)
      }
      this.settle()
    }
  }

  private settle(): void {
    const still: Waiter[] = []
    for (const w of this.waiters) {
      if (w.version <= this.durable) w.resolve()
      else still.push(w)
    }
    this.waiters = still
  }

  private fail(err: Error): void {
    this.lastError = err
    this.failures += 1
    this.opts.onFailure?.(err, this.failures)
    const waiting = this.waiters
    this.waiters = []
    for (const w of waiting) w.reject(new AppError('unavailable', UNAVAILABLE_MESSAGE))
    const min = this.opts.retryMinMs ?? 100
    const max = this.opts.retryMaxMs ?? 2000
    const delay = Math.min(max, min * 2 ** Math.min(this.failures - 1, 16))
    clearTimeout(this.retryTimer)
    this.retryTimer = setTimeout(() => this.kick(), delay)
    this.retryTimer.unref()
  }
}
