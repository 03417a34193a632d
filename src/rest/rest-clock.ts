/**
 * The proxy's view of time: a monotonic clock and timers, injected so that the pacer and the windows
 * can be tested with a manual clock. The agent's AgentClock satisfies it.
 */

/** Monotonic milliseconds and timers; `systemRestClock` is the default. */
export interface RestClock {
  now(): number
  setTimeout(fn: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
}

/** performance.now() and Node timers. */
export const systemRestClock: RestClock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, Math.max(0, ms)),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
}
