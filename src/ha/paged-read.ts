/**
 * Reads every key under a prefix as it was at ONE revision, in pages: the first page fixes the
 * revision, the next pages are pinned to it, so writes made meanwhile are not seen. Pages are sized so
 * that a page of entries no larger than `maxEntryBytes` stays under the client's response limit.
 */
import { EtcdClientError, prefixRangeEnd, type EtcdClient, type EtcdKeyValue } from './etcd-api.js'
import { checkEntry, DEFAULT_ETCD_LIMITS, type EtcdLimits } from './etcd-limits.js'

/** Every entry under a prefix at `revision`, in key order. */
export interface PrefixSnapshot {
  readonly revision: string
  readonly entries: readonly EtcdKeyValue[]
}

/** Options of `readPrefix`. */
export interface PagedReadOptions {
  readonly limits?: EtcdLimits
  /** At most this many entries per page (the limits may allow fewer); default 1000. */
  readonly pageSize?: number
  /** Whole reads started over when compaction removed the pinned revision mid-read; default 3. */
  readonly attempts?: number
}

// Room for the response header and each entry's revisions, version and lease.
const RESPONSE_OVERHEAD = 64 * 1024
const ENTRY_OVERHEAD = 64

/** How many entries one page may hold under `limits`. */
export function pageLimit(limits: EtcdLimits, pageSize = 1000): number {
  const fit = Math.floor((limits.maxResponseBytes - RESPONSE_OVERHEAD) / (limits.maxEntryBytes + ENTRY_OVERHEAD))
  return Math.max(1, Math.min(pageSize, fit))
}

/**
 * Reads all entries under `prefix` at one revision. An entry over `maxEntryBytes` (not written through
 * our limits) throws `EtcdLimitError`; a read overtaken by compaction starts over at a newer revision.
 */
export async function readPrefix(client: EtcdClient, prefix: string, options: PagedReadOptions = {}): Promise<PrefixSnapshot> {
  const attempts = options.attempts ?? 3
  for (let attempt = 1; ; attempt++) {
    try {
      return await readPages(client, prefix, options.limits ?? DEFAULT_ETCD_LIMITS, pageLimit(options.limits ?? DEFAULT_ETCD_LIMITS, options.pageSize))
    } catch (err) {
      if (!(err instanceof EtcdClientError && err.kind === 'compacted') || attempt >= attempts) throw err
    }
  }
}

async function readPages(client: EtcdClient, prefix: string, limits: EtcdLimits, limit: number): Promise<PrefixSnapshot> {
  const rangeEnd = prefixRangeEnd(prefix)
  const entries: EtcdKeyValue[] = []
  let from = Buffer.from(prefix)
  let revision: string | undefined
  for (;;) {
    const page = await client.range({ key: from, rangeEnd, limit, ...(revision !== undefined ? { revision } : {}) })
    // the header of a pinned read names the current revision; the snapshot's is the first page's
    revision ??= page.revision
    for (const kv of page.kvs) {
      checkEntry(kv.key, kv.value, limits)
      entries.push(kv)
    }
    const last = page.kvs.at(-1)
    if (!page.more || last === undefined) return { revision, entries }
    const next = Buffer.concat([Buffer.from(last.key), Buffer.from([0])])
    if (Buffer.compare(next, from) <= 0) throw new Error(`paged read of ${prefix.slice(0, 64)} did not advance (a key that is not UTF-8?)`)
    from = next
  }
}
