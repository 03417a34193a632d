/** The real state store with a switch: while `failing` is set every write fails with EIO (SetNextError-style). */
import type { DurableState, StateDelta } from '../../src/core/durable-state.js'
import type { StateStore } from '../../src/state/state-store.js'

/** Wraps a store; writes go through to it unless `failing`. */
export class FailingStore implements StateStore {
  failing = false
  failedWrites = 0
  /** Writes that went through to the real store. */
  writes = 0
  constructor(private readonly inner: StateStore) {}
  load(): Promise<DurableState | null> {
    return this.inner.load()
  }
  write(delta: StateDelta, full: () => DurableState, whole?: boolean): Promise<void> {
    if (this.failing) {
      this.failedWrites += 1
      return Promise.reject(Object.assign(new Error('EIO: i/o error, write'), { code: 'EIO' }))
    }
    this.writes += 1
    return this.inner.write(delta, full, whole)
  }
  close(): Promise<void> {
    return this.inner.close()
  }
}
