/** A manual clock for the agent's pure parts: time moves only when a test advances it. */
import type { AgentClock, TimerHandle } from '../../src/agent/clock.js'

interface Timer {
  readonly id: number
  readonly at: number
  readonly fn: () => void
}

/** Timers fire in time order as `advance` passes them; `random` is fixed at 0.5. */
export class FakeClock implements AgentClock {
  private t = 0
  private nextId = 1
  private timers: Timer[] = []
  /** How many timers fired so far (a busy loop would make this explode). */
  fired = 0

  now(): number {
    return this.t
  }

  wallNow(): number {
    return 1_767_225_600_000 + this.t
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const timer = { id: this.nextId++, at: this.t + Math.max(0, ms), fn }
    this.timers.push(timer)
    return timer.id
  }

  clearTimeout(handle: TimerHandle): void {
    this.timers = this.timers.filter((timer) => timer.id !== handle)
  }

  random(): number {
    return 0.5
  }

  /** Pending timers. */
  get pending(): number {
    return this.timers.length
  }

  /** Moves time forward by `ms`, firing due timers in order and letting promises settle between them. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms
    for (;;) {
      await settle()
      const due = this.timers.filter((timer) => timer.at <= end).sort((a, b) => a.at - b.at || a.id - b.id)[0]
      if (due === undefined) break
      this.timers = this.timers.filter((timer) => timer !== due)
      this.t = Math.max(this.t, due.at)
      this.fired += 1
      due.fn()
    }
    this.t = end
    await settle()
  }
}

/** Lets pending promise callbacks run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((resolve) => setImmediate(resolve))
}
