/** Where the controller's durable state lives: the journaled file store (the embedded default) or etcd. */
import type { DurableState, StateDelta } from '../core/durable-state.js'

/** The controller's store: whole state on load, changes on write (file journal or etcd). */
export interface StateStore {
  /** The saved state, or null before the first write; throws on a damaged store (changing nothing). */
  load(): Promise<DurableState | null>
  /**
   * Makes `delta` durable (one call at a time). `full` returns the whole current state, for stores that
   * write it now and then instead (a compaction, a first write); call it synchronously, before any await.
   * With `whole` (after a failed write, whose changes the delta does not repeat) write the whole state.
   */
  write(delta: StateDelta, full: () => DurableState, whole?: boolean): Promise<void>
  /** Releases the store (files, connections). */
  close(): Promise<void>
}
