/**
 * The agent's view of time, injected so that many agents can share one process and tests can drive
 * them: a monotonic clock for deadlines, the wall clock for plan expiry, timers and randomness.
 */

/** Timer handle as returned by the injected `setTimeout`. */
export type TimerHandle = unknown

/** Everything time- and chance-related the agent uses; `systemClock` is the default. */
export interface AgentClock {
  /** Monotonic milliseconds (never jumps with the wall clock); deadlines are counted on it. */
  now(): number
  /** Wall-clock milliseconds since the epoch; used only to check a plan's `exp`. */
  wallNow(): number
  setTimeout(fn: () => void, ms: number): TimerHandle
  clearTimeout(handle: TimerHandle): void
  /** A number in [0, 1) for jitter. */
  random(): number
}

/** The process clock: performance.now(), Date.now(), Node timers (a running agent keeps the process alive), Math.random. */
export const systemClock: AgentClock = {
  now: () => performance.now(),
  wallNow: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, Math.max(0, ms)),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  random: Math.random,
}

/** One re-armable timer: arming it again replaces the previous deadline. */
export class Alarm {
  private handle: TimerHandle | null = null

  constructor(private readonly clock: AgentClock, private readonly fire: () => void) {}

  /** Fires after `ms` (replacing any pending deadline). */
  arm(ms: number): void {
    this.cancel()
    this.handle = this.clock.setTimeout(() => {
      this.handle = null
      this.fire()
    }, ms)
  }

  /** Cancels the pending deadline, if any. */
  cancel(): void {
    if (this.handle === null) return
    this.clock.clearTimeout(this.handle)
    this.handle = null
  }

  /** True while a deadline is pending. */
  get armed(): boolean {
    return this.handle !== null
  }
}
