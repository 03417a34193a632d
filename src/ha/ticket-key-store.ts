/**
 * The cluster's TLS session-ticket keys in etcd, at `<prefix>tls/ticket-keys`: one sealed record
 * (server/ticket-key-seal.ts; etcd never holds the keys in the clear), beside the state but not under
 * `state/` (the state store's reconcile owns that prefix). Only the leader writes it, fenced, and only
 * over the copy it read (its mod revision): a leader that had not yet seen a newer record never replaces
 * it blindly. Every replica watches it and adopts what it holds (server/shared-ticket-keys.ts).
 */
import type { EtcdClient, EtcdWatch } from './etcd-api.js'
import { DEFAULT_ETCD_LIMITS } from './etcd-limits.js'
import { fencedWrite } from './fenced-write.js'
import type { Fence } from './leader-election.js'

/** The stored record (unparsed JSON, or null when the value is not JSON at all) and its mod revision. */
export interface StoredTicketKeys {
  readonly raw: unknown
  readonly modRevision: string
}

/** A record is a few hundred bytes; anything much longer was not written by a controller. */
const MAX_RECORD_BYTES = 4096

/** Reads, writes (fenced) and watches the sealed ticket-key record. */
export class EtcdTicketKeyStore {
  readonly key: string
  private readonly watchPrefix: string

  constructor(
    private readonly client: EtcdClient,
    prefix: string,
  ) {
    this.watchPrefix = `${prefix}tls/`
    this.key = `${this.watchPrefix}ticket-keys`
  }

  /** The stored record, or null when there is none. */
  async read(timeoutMs?: number): Promise<StoredTicketKeys | null> {
    const res = await this.client.range({ key: this.key }, timeoutMs)
    const kv = res.kvs[0]
    if (kv === undefined) return null
    return { raw: kv.value.length > MAX_RECORD_BYTES ? null : parseJson(kv.value.toString('utf8')), modRevision: kv.modRevision }
  }

  /**
   * Puts `record` if `fence` still leads and the key's mod revision is still `expected` (null: the key
   * must not exist). `refused` when either moved.
   */
  async write(fence: Fence, record: object, expected: string | null): Promise<'committed' | 'refused'> {
    const guard = { key: this.key, target: 'mod', result: 'equal', value: expected ?? '0' } as const
    const res = await fencedWrite(this.client, fence, [{ type: 'put', key: this.key, value: JSON.stringify(record) }], DEFAULT_ETCD_LIMITS, [guard])
    return res.status
  }

  /** Calls `onChange` on every change of the key and whenever the watch (re)connects. */
  watch(onChange: () => void): EtcdWatch {
    return this.client.watchPrefix(this.watchPrefix, onChange)
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return null
  }
}
