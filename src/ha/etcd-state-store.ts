/**
 * The controller's StateStore on etcd (SPEC "High availability"), for one leadership term: reads
 * the state at one revision, and writes each change as fenced transactions that etcd applies only while
 * this term's election key stands. The key layout is in state-layout.ts, the write order (why a write
 * split over several transactions is safe to interrupt anywhere) in state-writes.ts and README.md.
 *
 * No mirror of etcd's values is kept, only the index of its handoff-run keys (handoff-runs.ts: a delta
 * names shards, the keys are runs): a write sends the delta; the first write of a term, and every write
 * after a failed or ambiguous one (`whole`), reads what etcd holds, writes the difference to `full()` and
 * builds the index afresh. The first write of a term takes what etcd holds from the term's own load
 * instead of reading it again: nothing else writes under `state/` once this term leads (the previous
 * leader's transactions are fenced by an election key that was gone before this term began, and the
 * load comes after that), so the load's snapshot is exactly what etcd holds until this term writes.
 * At 10,000 nodes the second read made the first operator request after a take-over wait ~0.5 s more.
 */
import type { DurableState, StateDelta } from '../core/durable-state.js'
import type { StateStore } from '../state/state-store.js'
import { EtcdClientError, type EtcdClient, type EtcdKeyValue } from './etcd-api.js'
import { DEFAULT_ETCD_LIMITS, ETCD_DEFAULT_TXN_OPS, MIN_TXN_OPS, type EtcdLimits } from './etcd-limits.js'
import { fencedPhases } from './fenced-write.js'
import { HandoffRunIndex } from './handoff-runs.js'
import { FencedWriteRefused, NotLeading } from './ha-errors.js'
import { sameFence, type Fence } from './leader-election.js'
import { readPrefix } from './paged-read.js'
import { decodeState } from './state-decode.js'
import { StateLayout } from './state-layout.js'
import { deltaPhases, reconcileWrites, type WriteContext, type WritePhases } from './state-writes.js'

/** What an etcd state store needs. */
export interface EtcdStateStoreOptions {
  readonly client: EtcdClient
  /** The HA key prefix (e.g. `/pxe/`); the state lives under `<prefix>state/`. */
  readonly prefix: string
  /** The term this store writes for: every transaction is guarded by it. */
  readonly fence: Fence
  /** The fence this replica holds right now, or null (checks the renew deadline): asked before every transaction. */
  readonly currentFence: () => Fence | null
  readonly limits?: EtcdLimits
  /**
   * A member refused a transaction over its --max-txn-ops: the store now packs fewer operations (see
   * lowerTxnOps) and sends the same write again in transactions etcd takes.
   */
  readonly onTxnOpsLowered?: (from: number, to: number, err: EtcdClientError) => void
  /** etcd refused a write (this replica was deposed); called before the write rejects with the same error. */
  readonly onRefused?: (err: FencedWriteRefused) => void
}

/** One term's view of the state in etcd. One write at a time. */
export class EtcdStateStore implements StateStore {
  readonly layout: StateLayout
  private limits: EtcdLimits
  private readonly context: WriteContext
  /** The first write of a term, and the one after a failure, reconciles instead of trusting a delta. */
  private reconcileNext = true
  /** The handoff runs etcd holds after the last committed write (rebuilt by every reconcile). */
  private runs: HandoffRunIndex
  private busy = false
  private grants = 0
  /** What load() read, kept for the term's first write (see the top of this file); dropped at any write. */
  private loaded: readonly EtcdKeyValue[] | null = null
  private wrote = false

  constructor(private readonly options: EtcdStateStoreOptions) {
    this.layout = new StateLayout(options.prefix)
    this.limits = options.limits ?? DEFAULT_ETCD_LIMITS
    this.runs = new HandoffRunIndex(this.layout)
    // the election key's create revision is unique to this term: grant keys of two terms never collide
    this.context = { layout: this.layout, grantId: () => `${options.fence.createRevision}.${++this.grants}` }
  }

  /** The state at one revision (paged), validated; null when none was ever completely written. */
  async load(): Promise<DurableState | null> {
    const { entries } = await readPrefix(this.options.client, this.layout.root, { limits: this.limits })
    const state = decodeState(this.layout, entries)
    if (!this.wrote) this.loaded = entries
    return state
  }

  /**
   * Sends the delta (or, on the term's first write and with `whole`, the difference between etcd and
   * `full()`). Throws NotLeading when the term ended before a transaction was sent, FencedWriteRefused
   * when etcd refused one; after any failure the next write reconciles.
   */
  async write(delta: StateDelta, full: () => DurableState, whole = false): Promise<void> {
    if (this.busy) throw new Error('EtcdStateStore: one write at a time')
    this.busy = true
    this.wrote = true
    const loaded = this.loaded
    this.loaded = null // one use at most: after any write etcd is read again
    const state = whole || this.reconcileNext ? full() : null // before any await (the interface's rule)
    try {
      const phases = state === null ? deltaPhases(delta, this.context, this.runs) : await this.reconcile(state, loaded)
      for (;;) {
        try {
          await this.send(phases)
          break
        } catch (err) {
          // Over the members' --max-txn-ops: the same operations again, in smaller transactions. Those
          // that committed before the refusal are put again with the same values and deleted again
          // (no-ops), in the same order, so every state etcd passes through is still a prefix of the write.
          if (!this.lowerTxnOps(err)) throw err
        }
      }
      this.reconcileNext = false
    } catch (err) {
      this.reconcileNext = true
      throw err
    } finally {
      this.busy = false
    }
  }

  /**
   * A member refused a transaction for its operation count: max_txn_ops is over the members'
   * --max-txn-ops. The store falls back to etcd's default (128), or below it to half as many (at most
   * three more refusals, down to 16). Transactions of the write may have committed before the refused one;
   * that is safe (the write order makes any prefix safe), and write() sends the same operations again.
   * Returns whether it lowered the figure (false: not this refusal, or already at the floor).
   */
  private lowerTxnOps(err: unknown): boolean {
    if (!(err instanceof EtcdClientError) || err.kind !== 'too_many_ops') return false
    const from = this.limits.maxTxnOps
    const to = from > ETCD_DEFAULT_TXN_OPS ? ETCD_DEFAULT_TXN_OPS : Math.max(MIN_TXN_OPS, Math.floor(from / 2))
    if (to === from) return false
    this.limits = { ...this.limits, maxTxnOps: to }
    this.options.onTxnOpsLowered?.(from, to, err)
    return true
  }

  /** Nothing to release: the etcd client belongs to the HA runtime. */
  async close(): Promise<void> {}

  /** `loaded`: what etcd holds, when the term's load read it and nothing was written since; else it is read now. */
  private async reconcile(state: DurableState, loaded: readonly EtcdKeyValue[] | null): Promise<WritePhases> {
    const entries = loaded ?? (await readPrefix(this.options.client, this.layout.root, { limits: this.limits })).entries
    const { phases, runs } = reconcileWrites(entries, state, this.context)
    this.runs = runs // exact once the ops committed; a failure makes the next write reconcile again
    return phases
  }

  private async send(phases: WritePhases): Promise<void> {
    const { client, fence } = this.options
    const res = await fencedPhases(client, fence, phases, this.limits, () => {
      const current = this.options.currentFence()
      if (current === null || !sameFence(current, fence)) throw new NotLeading(fence)
    })
    if (res.status === 'committed') return
    const err = new FencedWriteRefused(fence, res.revision, res.committed)
    this.options.onRefused?.(err)
    throw err
  }
}
