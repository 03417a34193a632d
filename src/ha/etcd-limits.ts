/**
 * etcd's request limits, checked before anything is sent: etcd refuses a request over 1.5 MiB or a
 * transaction over 128 operations, and our client refuses a response over 64 MiB (etcd-client.ts sets
 * it). Refusing locally gives a clear error and keeps a doomed request (and the client's retries of it)
 * off the wire.
 */
import { prefixRangeEnd } from './etcd-api.js'

/** The largest response the client accepts (set on the gRPC channel, etcd-client.ts). */
export const MAX_RESPONSE_BYTES = 64 * 1024 * 1024

/** The limits writes and paged reads are sized by. */
export interface EtcdLimits {
  /** etcd's `--max-request-bytes` (default 1.5 MiB). */
  readonly maxRequestBytes: number
  /** etcd's `--max-txn-ops` (default 128). */
  readonly maxTxnOps: number
  /**
   * The client's largest response: 64 MiB, set on the gRPC channel (etcd-client.ts; gRPC's default is 4
   * MiB). Read pages are sized by it: at 4 MiB a page held only 62 entries of the 64 KiB an entry may
   * reach, so loading 10,000 node records took some 200 round trips, over a second of a take-over.
   */
  readonly maxResponseBytes: number
  /** Our bound on one stored entry (key + value): writes refuse larger ones, and read pages are sized by it. */
  readonly maxEntryBytes: number
}

/** etcd's default --max-txn-ops. */
export const ETCD_DEFAULT_TXN_OPS = 128

/** The fewest operations per transaction we configure or fall back to: a fenced transaction carries two compares besides them. */
export const MIN_TXN_OPS = 16

/** etcd's and the client's defaults, and 64 KiB entries (a node record is far smaller). */
export const DEFAULT_ETCD_LIMITS: EtcdLimits = Object.freeze({
  maxRequestBytes: 1.5 * 1024 * 1024,
  maxTxnOps: ETCD_DEFAULT_TXN_OPS,
  maxResponseBytes: MAX_RESPONSE_BYTES,
  maxEntryBytes: 64 * 1024,
})

/** One write of a fenced transaction. */
export type WriteOp =
  | { readonly type: 'put'; readonly key: string; readonly value: Buffer | string }
  | { readonly type: 'delete'; readonly key: string }
  | { readonly type: 'delete_prefix'; readonly prefix: string }
  /** Every key in `[key, rangeEnd)`. */
  | { readonly type: 'delete_range'; readonly key: string; readonly rangeEnd: string }

/** A write or read that would break a limit; nothing was sent. */
export class EtcdLimitError extends Error {
  override readonly name = 'EtcdLimitError'
  constructor(readonly code: 'too_many_ops' | 'request_too_large' | 'entry_too_large', message: string) {
    super(message)
  }
}

// Upper bounds of the protobuf framing (tags, lengths, int64 fields) around keys and values, and of the
// raft envelope etcd adds before it measures the request.
const OP_OVERHEAD = 48
const COMPARE_OVERHEAD = 48
const ENVELOPE_OVERHEAD = 512

const bytes = (s: Buffer | string) => (typeof s === 'string' ? Buffer.byteLength(s, 'utf8') : s.length)

/** An upper bound of the encoded size of `op` inside a transaction. */
export function writeOpBytes(op: WriteOp): number {
  switch (op.type) {
    case 'put':
      return bytes(op.key) + bytes(op.value) + OP_OVERHEAD
    case 'delete':
      return bytes(op.key) + OP_OVERHEAD
    case 'delete_prefix':
      return 2 * bytes(op.prefix) + OP_OVERHEAD
    case 'delete_range':
      return bytes(op.key) + bytes(op.rangeEnd) + OP_OVERHEAD
  }
}

/** Throws when a put's key and value together exceed `limits.maxEntryBytes`. */
export function checkEntry(key: string, value: Buffer | string, limits: EtcdLimits): void {
  const size = bytes(key) + bytes(value)
  if (size > limits.maxEntryBytes) {
    throw new EtcdLimitError('entry_too_large', `entry ${key.slice(0, 64)} is ${size} bytes, over the ${limits.maxEntryBytes}-byte entry limit`)
  }
}

/** The bytes a transaction guarded by compares on `compareKeys` has left for its operations. */
function opBudget(compareKeys: readonly string[], limits: EtcdLimits): number {
  return limits.maxRequestBytes - ENVELOPE_OVERHEAD - compareKeys.reduce((sum, k) => sum + bytes(k) + COMPARE_OVERHEAD, 0)
}

/** Throws `EtcdLimitError` unless one transaction with these compares and `ops` is within the limits. */
export function checkTransaction(compareKeys: readonly string[], ops: readonly WriteOp[], limits: EtcdLimits): void {
  if (ops.length > limits.maxTxnOps || compareKeys.length > limits.maxTxnOps) {
    throw new EtcdLimitError('too_many_ops', `a transaction of ${ops.length} operations is over etcd's limit of ${limits.maxTxnOps}`)
  }
  for (const op of ops) if (op.type === 'put') checkEntry(op.key, op.value, limits)
  const size = ops.reduce((sum, op) => sum + writeOpBytes(op), 0)
  const budget = opBudget(compareKeys, limits)
  if (size > budget) {
    throw new EtcdLimitError('request_too_large', `a transaction of about ${size} bytes is over etcd's request limit (${budget} bytes left for operations)`)
  }
}

/** The keys an operation touches, as `[from, to)`; `to` null: to the end of the key space. */
function span(op: WriteOp): readonly [Buffer, Buffer | null] {
  switch (op.type) {
    case 'put':
    case 'delete':
      return [Buffer.from(op.key), Buffer.concat([Buffer.from(op.key), Buffer.from([0])])]
    case 'delete_prefix': {
      const end = prefixRangeEnd(op.prefix)
      return [Buffer.from(op.prefix), end.length === 1 && end[0] === 0 ? null : end]
    }
    case 'delete_range':
      return [Buffer.from(op.key), Buffer.from(op.rangeEnd)]
  }
}

/**
 * Two operations of one transaction on the same key: etcd refuses the whole transaction ("duplicate key
 * given in txn request") when a put meets another put, a delete, or a range holding its key.
 */
function collides(a: WriteOp, b: WriteOp): boolean {
  if (a.type !== 'put' && b.type !== 'put') return false // deletes may overlap each other
  const [aFrom, aTo] = span(a)
  const [bFrom, bTo] = span(b)
  return (bTo === null || Buffer.compare(aFrom, bTo) < 0) && (aTo === null || Buffer.compare(bFrom, aTo) < 0)
}

/**
 * Splits `ops`, in the given order, into as few transactions as the limits allow, each guarded by the
 * same compares; an operation on a key that an earlier one of the same transaction touches begins the
 * next transaction (etcd would refuse the pair). Throws when a single operation cannot fit any transaction.
 */
export function splitIntoTransactions(compareKeys: readonly string[], ops: readonly WriteOp[], limits: EtcdLimits): WriteOp[][] {
  const budget = opBudget(compareKeys, limits)
  const batches: WriteOp[][] = []
  let batch = new TxnBatch()
  let size = 0
  for (const op of ops) {
    checkTransaction(compareKeys, [op], limits)
    const opSize = writeOpBytes(op)
    if (batch.ops.length > 0 && (batch.ops.length >= limits.maxTxnOps || size + opSize > budget || batch.collides(op))) {
      batches.push(batch.ops)
      batch = new TxnBatch()
      size = 0
    }
    batch.add(op)
    size += opSize
  }
  if (batch.ops.length > 0) batches.push(batch.ops)
  return batches
}

/**
 * One transaction being packed, with what `collides` needs to answer in constant time for a point
 * operation: with etcd's --max-txn-ops raised to thousands, comparing every pair cost more than the write.
 */
class TxnBatch {
  readonly ops: WriteOp[] = []
  /** Keys of the point puts, and of the point deletes. */
  private readonly puts = new Set<string>()
  private readonly deletes = new Set<string>()
  /** Range deletes (rare: a reconcile's prefix drops), compared one by one. */
  private readonly ranges: WriteOp[] = []

  collides(op: WriteOp): boolean {
    if (op.type === 'put') return this.puts.has(op.key) || this.deletes.has(op.key) || this.ranges.some((r) => collides(r, op))
    if (op.type === 'delete') return this.puts.has(op.key)
    return this.ops.some((other) => collides(other, op)) // a range meets every put inside it
  }

  add(op: WriteOp): void {
    this.ops.push(op)
    if (op.type === 'put') this.puts.add(op.key)
    else if (op.type === 'delete') this.deletes.add(op.key)
    else this.ranges.push(op)
  }
}
