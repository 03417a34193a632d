/** A wait on the agent's clock that an AbortSignal can end early. */
import type { AgentClock } from './clock.js'

/** Waits `ms` (at most a day per timer, since Node fires longer timers at once); resolves false when aborted. */
export function sleep(clock: AgentClock, ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted === true) return Promise.resolve(false)
  return new Promise((resolve) => {
    const end = clock.now() + ms
    let handle: unknown
    const onAbort = () => {
      clock.clearTimeout(handle)
      resolve(false)
    }
    const arm = () => {
      const left = end - clock.now()
      if (left <= 0) {
        signal?.removeEventListener('abort', onAbort)
        resolve(true)
        return
      }
      handle = clock.setTimeout(arm, Math.min(left, MAX_TIMER_MS))
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    arm()
  })
}

/** The longest single timer armed (Node's limit is 2^31-1 ms, about 24.8 days). */
export const MAX_TIMER_MS = 86_400_000
