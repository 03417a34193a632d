/**
 * Fenced writes: a transaction whose puts and deletes apply only while the writer's election key still
 * exists with the create revision and lease it had when the writer was elected. A deposed leader (its
 * lease expired, it was frozen, it lost etcd) gets `refused`, never a silent success and never an
 * exception, so the caller can audit `fenced_write_refused` and step down.
 */
import type { EtcdClient, TxnCompare, TxnOp } from './etcd-api.js'
import { checkTransaction, DEFAULT_ETCD_LIMITS, splitIntoTransactions, type EtcdLimits, type WriteOp } from './etcd-limits.js'
import { prefixRangeEnd } from './etcd-api.js'
import type { Fence } from './leader-election.js'

/** A fenced transaction's outcome; `revision` is etcd's revision after it (or when it was refused). */
export type FencedWriteResult = { readonly status: 'committed' | 'refused'; readonly revision: string }

/** The outcome of a write split into several transactions; `committed` counts those that applied. */
export interface FencedWritesResult {
  readonly status: 'committed' | 'refused'
  readonly revision: string
  readonly committed: number
  readonly transactions: number
}

/** The compares that make a transaction apply only for the holder of `fence`. */
export function fenceCompares(fence: Fence): TxnCompare[] {
  return [
    { key: fence.key, target: 'create', result: 'equal', value: fence.createRevision },
    { key: fence.key, target: 'lease', result: 'equal', value: fence.leaseId },
  ]
}

function txnOp(op: WriteOp): TxnOp {
  if (op.type === 'delete_prefix') return { type: 'delete', key: op.prefix, rangeEnd: prefixRangeEnd(op.prefix) }
  if (op.type === 'delete_range') return { type: 'delete', key: op.key, rangeEnd: Buffer.from(op.rangeEnd) }
  return op
}

/**
 * Applies `ops` in one transaction guarded by `fence`. Throws `EtcdLimitError` (before sending) when the
 * transaction is over a limit, and `EtcdClientError` when etcd could not be asked; a failed guard is
 * the result `refused`.
 */
export async function fencedWrite(
  client: EtcdClient,
  fence: Fence,
  ops: readonly WriteOp[],
  limits: EtcdLimits = DEFAULT_ETCD_LIMITS,
  /** Further compares that must hold too (e.g. a key unchanged since it was read); any failing one is `refused`. */
  guards: readonly TxnCompare[] = [],
): Promise<FencedWriteResult> {
  const compare = [...fenceCompares(fence), ...guards]
  checkTransaction(
    compare.map((c) => c.key),
    ops,
    limits,
  )
  const res = await client.txn({ compare, success: ops.map(txnOp) })
  return { status: res.succeeded ? 'committed' : 'refused', revision: res.revision }
}

/**
 * Applies `ops` in the caller's order as several fenced transactions when one would break a limit;
 * stops at the first refusal. Not atomic across transactions: order the operations so that every
 * prefix of them is a state a new leader can start from (e.g. records first, the generation last).
 * `beforeEach` runs before every transaction and may throw to stop (e.g. the leader's renew deadline).
 */
export async function fencedWrites(
  client: EtcdClient,
  fence: Fence,
  ops: readonly WriteOp[],
  limits: EtcdLimits = DEFAULT_ETCD_LIMITS,
  beforeEach?: () => void,
): Promise<FencedWritesResult> {
  const batches = splitIntoTransactions(
    fenceCompares(fence).map((c) => c.key),
    ops,
    limits,
  )
  let revision = ''
  for (const [index, batch] of batches.entries()) {
    beforeEach?.()
    const res = await fencedWrite(client, fence, batch, limits)
    revision = res.revision
    if (res.status === 'refused') return { status: 'refused', revision, committed: index, transactions: batches.length }
  }
  return { status: 'committed', revision, committed: batches.length, transactions: batches.length }
}
