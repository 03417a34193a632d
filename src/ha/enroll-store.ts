/**
 * The enrollment queue in etcd (HA): one key per request, `<prefix>enroll/<request id>`, beside the state
 * (not under `state/`, which the state store's reconcile owns). Only the leader writes, fenced under its
 * term, so a deposed leader cannot bring back a request a newer leader answered; a new term reads the
 * whole prefix at one revision, so a take-over loses no request and no issued certificate.
 */
import { storedEnrollSchema, type EnrollStore, type StoredEnroll } from '../core/enroll-record.js'
import type { EtcdClient } from './etcd-api.js'
import { fencedPhases } from './fenced-write.js'
import { DEFAULT_ETCD_LIMITS, type EtcdLimits, type WriteOp } from './etcd-limits.js'
import { FencedWriteRefused } from './ha-errors.js'
import type { Fence } from './leader-election.js'
import { readPrefix } from './paged-read.js'

/** The queue's store of one leadership term. */
export class EtcdEnrollStore implements EnrollStore {
  private readonly prefix: string

  constructor(
    private readonly client: EtcdClient,
    prefix: string,
    private readonly fence: Fence,
    private readonly limits: EtcdLimits = DEFAULT_ETCD_LIMITS,
    /** Told when etcd refused a write under this term's fence (the term ends). */
    private readonly onRefused?: (err: FencedWriteRefused) => void,
  ) {
    this.prefix = `${prefix}enroll/`
  }

  /** Every request kept; a value that is not a request is skipped (it was not written by a controller). */
  async load(): Promise<StoredEnroll[]> {
    const { entries } = await readPrefix(this.client, this.prefix, { limits: this.limits })
    const out: StoredEnroll[] = []
    for (const kv of entries) {
      let json: unknown
      try {
        json = JSON.parse(kv.value.toString('utf8'))
      } catch {
        continue
      }
      const parsed = storedEnrollSchema.safeParse(json)
      if (parsed.success && `${this.prefix}${parsed.data.id}` === kv.key) out.push(parsed.data)
    }
    return out
  }

  async write(put: readonly StoredEnroll[], deleted: readonly string[]): Promise<void> {
    const ops: WriteOp[] = [
      ...deleted.map((id): WriteOp => ({ type: 'delete', key: `${this.prefix}${id}` })),
      ...put.map((record): WriteOp => ({ type: 'put', key: `${this.prefix}${record.id}`, value: JSON.stringify(record) })),
    ]
    if (ops.length === 0) return
    // one phase: the requests are independent, any subset written is a queue a new leader can serve
    const res = await fencedPhases(this.client, this.fence, [ops], this.limits)
    if (res.status === 'refused') {
      const err = new FencedWriteRefused(this.fence, res.revision, res.committed)
      this.onRefused?.(err)
      throw err
    }
  }
}
