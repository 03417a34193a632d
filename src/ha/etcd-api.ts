/**
 * The etcd v3 calls the HA layer uses, as our own types: election, fencing and paged reads depend on
 * this interface only; `etcd-client.ts` implements it over the npm `etcd3` library. Revisions and lease
 * IDs are int64 in etcd; they travel here as decimal strings.
 */

/** Where etcd is and the mutual-TLS material to reach it (PEM file paths). */
export interface EtcdConnectionConfig {
  readonly endpoints: readonly string[]
  readonly ca: string
  readonly cert: string
  readonly key: string
  /** The DNS name the members' server certificates carry, sent as SNI and checked instead of the endpoint's host. */
  readonly serverName?: string | undefined
}

/** One key-value as etcd stores it. */
export interface EtcdKeyValue {
  readonly key: string
  readonly value: Buffer
  readonly createRevision: string
  readonly modRevision: string
  readonly version: string
  readonly lease: string
}

/** A range read: `key` alone, or `[key, rangeEnd)`; optionally limited, sorted, or pinned to a revision. */
export interface RangeRequest {
  readonly key: string | Buffer
  readonly rangeEnd?: Buffer
  readonly limit?: number
  readonly revision?: string
  readonly sort?: { readonly target: 'key' | 'create' | 'mod'; readonly order: 'ascend' | 'descend' }
}

/** What a range read returns; `revision` is the store revision the read was served at. */
export interface RangeResult {
  readonly kvs: readonly EtcdKeyValue[]
  readonly more: boolean
  readonly revision: string
}

/** A transaction guard on one key's create/mod revision, version or lease (numbers as decimal strings). */
export interface TxnCompare {
  readonly key: string
  readonly target: 'create' | 'mod' | 'version' | 'lease'
  readonly result: 'equal' | 'not_equal' | 'greater' | 'less'
  readonly value: string
}

/** One operation of a transaction. */
export type TxnOp =
  | { readonly type: 'put'; readonly key: string; readonly value: Buffer | string; readonly lease?: string }
  | { readonly type: 'delete'; readonly key: string; readonly rangeEnd?: Buffer }
  | { readonly type: 'get'; readonly key: string }

/** A transaction: if every compare holds, `success` runs, else `failure`. */
export interface TxnRequest {
  readonly compare: readonly TxnCompare[]
  readonly success: readonly TxnOp[]
  readonly failure?: readonly TxnOp[]
}

/** Whether the compares held, the revision after the transaction, and the results of its `get` ops. */
export interface TxnResult {
  readonly succeeded: boolean
  readonly revision: string
  readonly gets: readonly (readonly EtcdKeyValue[])[]
}

/** A running watch; `cancel` ends it. */
export interface EtcdWatch {
  cancel(): Promise<void>
}

/** The etcd v3 calls the HA layer needs. `timeoutMs` bounds one call (default: the client's). */
export interface EtcdClient {
  grantLease(ttlSeconds: number, timeoutMs?: number): Promise<{ id: string; ttlSeconds: number }>
  /**
   * Renews a lease once; resolves with its remaining TTL in seconds (0: the lease is gone). Rejects
   * with a timeout when no answer was read within `timeoutMs`, counting an answer that arrived in time
   * but waited behind a busy event loop (it is read before the timeout is declared).
   */
  keepAliveOnce(leaseId: string, timeoutMs: number): Promise<number>
  revokeLease(leaseId: string, timeoutMs?: number): Promise<void>
  range(request: RangeRequest, timeoutMs?: number): Promise<RangeResult>
  txn(request: TxnRequest, timeoutMs?: number): Promise<TxnResult>
  /** Calls `onChange` on every change under `prefix` and whenever the watch (re)connects. */
  watchPrefix(prefix: string, onChange: () => void): EtcdWatch
  close(): void
}

/**
 * Why an etcd call failed, in terms callers act on. `too_many_ops`: a member refused a transaction over
 * its --max-txn-ops (the config says more than etcd allows).
 */
export type EtcdErrorKind = 'unavailable' | 'timeout' | 'lease_not_found' | 'compacted' | 'too_many_ops' | 'failed'

/** An etcd call that failed; `kind` says whether retrying can help. */
export class EtcdClientError extends Error {
  override readonly name = 'EtcdClientError'
  constructor(readonly kind: EtcdErrorKind, message: string) {
    super(message)
  }
}

/** The end of the key range holding every key that starts with `prefix`. */
export function prefixRangeEnd(prefix: string | Buffer): Buffer {
  const end = Buffer.from(prefix)
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1
      return end.subarray(0, i + 1)
    }
  }
  return Buffer.from([0]) // all 0xff: to the end of the keyspace
}
