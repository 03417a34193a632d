/**
 * The CRL an operator pushed, in etcd at `<prefix>crl/pushed` (canonical PEM), beside the state but not
 * under `state/` (the state store's reconcile owns that prefix). Only the leader writes it, with a fenced
 * transaction that also requires the key unchanged since the leader read it: a leader that had not yet
 * seen a newer copy can never overwrite it with an older one. Every replica watches it.
 */
import type { EtcdClient, EtcdWatch } from './etcd-api.js'
import { DEFAULT_ETCD_LIMITS, type EtcdLimits } from './etcd-limits.js'
import { fencedWrite } from './fenced-write.js'
import type { Fence } from './leader-election.js'

/** The stored copy and the mod revision a write must find unchanged. */
export interface StoredCrl {
  readonly pem: string
  readonly modRevision: string
}

/**
 * Room for the canonical PEM of any CRL a 1 MiB body can carry, and its key: the DER is at most 3/4 of the
 * body, its base64 4/3 of that with a newline every 64 characters (so up to 65/64 of the body when the
 * body was sent with longer lines), plus the labels. Under etcd's 1.5 MiB request limit. (The state's
 * 64 KiB entry bound sizes paged reads, which this key never is.)
 */
const CRL_ENTRY_BYTES = Math.ceil((1024 * 1024 * 65) / 64) + 4096

/** Reads, writes (fenced) and watches the cluster's pushed CRL. */
export class EtcdCrlStore {
  readonly key: string
  private readonly watchPrefix: string
  private readonly limits: EtcdLimits

  constructor(
    private readonly client: EtcdClient,
    prefix: string,
    limits: EtcdLimits = DEFAULT_ETCD_LIMITS,
  ) {
    this.watchPrefix = `${prefix}crl/`
    this.key = `${this.watchPrefix}pushed`
    this.limits = { ...limits, maxEntryBytes: Math.max(limits.maxEntryBytes, CRL_ENTRY_BYTES) }
  }

  /** The stored copy, or null when none was ever pushed. */
  async read(timeoutMs?: number): Promise<StoredCrl | null> {
    const res = await this.client.range({ key: this.key }, timeoutMs)
    const kv = res.kvs[0]
    return kv === undefined ? null : { pem: kv.value.toString('utf8'), modRevision: kv.modRevision }
  }

  /**
   * Puts `pem` if `fence` still leads and the key's mod revision is still `expected` (null: the key must
   * not exist, whose mod revision etcd compares as 0). `refused` when either moved.
   */
  async write(fence: Fence, pem: string, expected: string | null): Promise<'committed' | 'refused'> {
    const guard = { key: this.key, target: 'mod', result: 'equal', value: expected ?? '0' } as const
    const res = await fencedWrite(this.client, fence, [{ type: 'put', key: this.key, value: pem }], this.limits, [guard])
    return res.status
  }

  /** Calls `onChange` on every change of the key and whenever the watch (re)connects. */
  watch(onChange: () => void): EtcdWatch {
    return this.client.watchPrefix(this.watchPrefix, onChange)
  }
}
