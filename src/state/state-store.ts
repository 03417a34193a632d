/** Where the controller's durable state lives; the file store is the embedded default. */

/** Loads and saves one snapshot of type T. */
export interface StateStore<T> {
  /** The saved snapshot, or null when there is none yet (a first start); throws on a damaged store. */
  load(): Promise<T | null>
  /** Replaces the snapshot atomically and durably; concurrent saves coalesce, the latest value wins. */
  save(value: T): Promise<void>
  /** Waits for pending saves and releases the store. */
  close?(): Promise<void>
}
