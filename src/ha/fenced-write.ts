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
  // every operation a phase of its own: no two transactions in flight, the caller's order kept
  return fencedPhases(
    client,
    fence,
    ops.map((op) => [op]),
    limits,
    beforeEach,
  )
}

/** Transactions of one phase in flight at once, at most: enough to share etcd's commits, not a flood of 1.5 MiB requests. */
export const PHASE_CONCURRENCY = 4

/**
 * Applies `phases` (operations in write order, grouped so that any subset of one phase's operations,
 * on top of every earlier phase, is a safe state) as fenced transactions, packed as `fencedWrites`
 * packs them. Transactions that hold operations of one phase only go to etcd together (up to
 * `concurrency` in flight): the order among them does not matter, so a large write costs a few round
 * trips instead of one per transaction. A transaction that reaches into a later phase waits until
 * everything before it committed, and so does one that touches a key another in flight touches.
 * Stops starting transactions at the first refusal or error, and returns (or throws) only once those
 * in flight have ended: no write of it is still on its way when the caller learns the outcome. A refusal
 * is returned even when another transaction failed beside it; `committed` then counts every transaction
 * that committed, also those in flight beside the refused one.
 */
export async function fencedPhases(
  client: EtcdClient,
  fence: Fence,
  phases: readonly (readonly WriteOp[])[],
  limits: EtcdLimits = DEFAULT_ETCD_LIMITS,
  beforeEach?: () => void,
  concurrency = PHASE_CONCURRENCY,
): Promise<FencedWritesResult> {
  const phaseOf: number[] = []
  phases.forEach((ops, phase) => ops.forEach(() => phaseOf.push(phase)))
  const batches = splitIntoTransactions(
    fenceCompares(fence).map((c) => c.key),
    phases.flat(),
    limits,
  )
  let revision = ''
  let committed = 0
  let refused = false
  let failure: { error: unknown } | null = null
  const inFlight = new Set<Promise<void>>()
  let group: { phase: number; keys: Set<string> } | null = null
  const settle = async () => {
    await Promise.all(inFlight)
    group = null
  }
  let at = 0
  for (const batch of batches) {
    const first = phaseOf[at]!
    const last = phaseOf[at + batch.length - 1]!
    at += batch.length
    const keys = pointKeys(batch)
    const joins = group !== null && first === last && group.phase === first && keys !== null && inFlight.size < concurrency && !overlaps(group.keys, keys)
    if (!joins) await settle()
    if (refused || failure !== null) break
    try {
      beforeEach?.()
    } catch (error) {
      failure = { error }
      break
    }
    if (first === last && keys !== null) {
      group ??= { phase: first, keys: new Set() }
      for (const key of keys) group.keys.add(key)
    }
    // never rejects (settle awaits these, and a rejection would leave others in flight)
    const sent: Promise<void> = fencedWrite(client, fence, batch, limits).then(
      (res) => {
        if (res.status === 'refused') refused = true
        else committed += 1
        // the refusal's revision, or the last commit's (revisions are decimal strings of growing length)
        if (revision === '' || res.revision.length > revision.length || (res.revision.length === revision.length && res.revision > revision)) revision = res.revision
      },
      (error: unknown) => {
        failure ??= { error }
      },
    )
    inFlight.add(sent)
    void sent.finally(() => inFlight.delete(sent))
    // a lone transaction (one that spans phases, or a range delete) is never overlapped by the next
    if (first !== last || keys === null) await settle()
  }
  await settle()
  // A refusal says more than an error beside it (a deposed leader must step down at once): it wins.
  if (refused) return { status: 'refused', revision, committed, transactions: batches.length }
  if (failure !== null) throw failure.error
  return { status: 'committed', revision, committed, transactions: batches.length }
}

/** The keys a transaction's operations name, or null when one covers a range (then it runs alone). */
function pointKeys(batch: readonly WriteOp[]): Set<string> | null {
  const keys = new Set<string>()
  for (const op of batch) {
    if (op.type !== 'put' && op.type !== 'delete') return null
    keys.add(op.key)
  }
  return keys
}

function overlaps(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  for (const key of b) if (a.has(key)) return true
  return false
}
