// Size checks of fenced transactions and read pages, without etcd (fenced-write.test.ts sends them).
import t from 'tap'
import { checkTransaction, DEFAULT_ETCD_LIMITS, EtcdLimitError, splitIntoTransactions, writeOpBytes, type WriteOp } from '../../src/ha/etcd-limits.js'
import { pageLimit } from '../../src/ha/paged-read.js'

const FENCE_KEYS = ['/pxe/election/694d7c8a1b2e3f40', '/pxe/election/694d7c8a1b2e3f40']
const put = (key: string, bytes: number): WriteOp => ({ type: 'put', key, value: Buffer.alloc(bytes, 0x61) })
const refusedWith = (code: EtcdLimitError['code']) => ({ name: 'EtcdLimitError', code })

t.test('one transaction: operations, entry size and request size are checked', async (t) => {
  t.doesNotThrow(() => checkTransaction(FENCE_KEYS, [], DEFAULT_ETCD_LIMITS), 'an empty fenced transaction is fine')
  const ops128 = Array.from({ length: 128 }, (_, i) => put(`/pxe/n/${i}`, 10))
  t.doesNotThrow(() => checkTransaction(FENCE_KEYS, ops128, DEFAULT_ETCD_LIMITS), '128 operations: etcd’s limit')
  t.throws(() => checkTransaction(FENCE_KEYS, [...ops128, put('/pxe/n/x', 10)], DEFAULT_ETCD_LIMITS), refusedWith('too_many_ops'), '129 are refused')
  t.throws(() => checkTransaction(FENCE_KEYS, [put('/pxe/big', 64 * 1024)], DEFAULT_ETCD_LIMITS), refusedWith('entry_too_large'), 'an entry over 64 KiB')
  const nearly = Array.from({ length: 26 }, (_, i) => put(`/pxe/n/${i}`, 60 * 1024)) // 1.52 MiB of values
  t.throws(() => checkTransaction(FENCE_KEYS, nearly, DEFAULT_ETCD_LIMITS), refusedWith('request_too_large'), 'a transaction over 1.5 MiB')
  t.doesNotThrow(() => checkTransaction(FENCE_KEYS, nearly.slice(0, 25), DEFAULT_ETCD_LIMITS), 'one entry less fits')
  const err = t.throws(() => checkTransaction(FENCE_KEYS, nearly, DEFAULT_ETCD_LIMITS)) as EtcdLimitError
  t.match(err.message, /over etcd's request limit/, 'the message says which limit')
})

t.test('splitting keeps the caller’s order and fills each transaction up to a limit', async (t) => {
  const ops = Array.from({ length: 300 }, (_, i) => put(`/pxe/n/${String(i).padStart(3, '0')}`, 10 * 1024))
  const batches = splitIntoTransactions(FENCE_KEYS, ops, DEFAULT_ETCD_LIMITS)
  t.same(batches.flat(), ops, 'every operation, in the given order')
  t.ok(batches.length >= 3, `${batches.length} transactions for 300 operations of 10 KiB`)
  for (const batch of batches) t.doesNotThrow(() => checkTransaction(FENCE_KEYS, batch, DEFAULT_ETCD_LIMITS))
  for (const [i, batch] of batches.slice(0, -1).entries()) {
    const next = batches[i + 1]![0]!
    t.throws(() => checkTransaction(FENCE_KEYS, [...batch, next], DEFAULT_ETCD_LIMITS), EtcdLimitError, `transaction ${i + 1} is full`)
  }
  const small = Array.from({ length: 200 }, (_, i) => put(`/pxe/n/${i}`, 1))
  t.same(splitIntoTransactions(FENCE_KEYS, small, DEFAULT_ETCD_LIMITS).map((b) => b.length), [128, 72], 'small operations split by count')
  t.same(splitIntoTransactions(FENCE_KEYS, [], DEFAULT_ETCD_LIMITS), [], 'nothing to write, no transaction')
  t.throws(() => splitIntoTransactions(FENCE_KEYS, [put('/pxe/ok', 1), put('/pxe/huge', 100_000)], DEFAULT_ETCD_LIMITS), refusedWith('entry_too_large'), 'one operation that fits no transaction is refused')
})

t.test('two operations on one key never share a transaction: etcd would refuse it ("duplicate key given in txn request")', async (t) => {
  const del = (key: string): WriteOp => ({ type: 'delete', key })
  const sizes = (ops: WriteOp[]) => splitIntoTransactions(FENCE_KEYS, ops, DEFAULT_ETCD_LIMITS).map((b) => b.length)
  t.same(sizes([del('/pxe/a'), put('/pxe/b', 1), put('/pxe/a', 1), put('/pxe/c', 1)]), [2, 2], 'a delete, then a put of its key: the put begins the next transaction')
  t.same(sizes([put('/pxe/a', 1), put('/pxe/a', 2)]), [1, 1], 'two puts of one key')
  t.same(sizes([put('/pxe/a', 1), put('/pxe/b', 1), del('/pxe/a')]), [2, 1], 'a put, then a delete of its key')
  t.same(sizes([del('/pxe/a'), put('/pxe/b', 1), { type: 'delete_prefix', prefix: '/pxe/b' }]), [2, 1], 'a prefix delete over an earlier put')
  t.same(sizes([put('/pxe/g/5', 1), { type: 'delete_range', key: '/pxe/g/', rangeEnd: '/pxe/g/9' }]), [1, 1], 'a put inside a later range delete')
  t.same(sizes([{ type: 'delete_prefix', prefix: '/pxe/g/' }, put('/pxe/g/x', 1)]), [1, 1], 'a put under an earlier prefix delete')
  t.same(sizes([put('/pxe/g9', 1), { type: 'delete_range', key: '/pxe/g/', rangeEnd: '/pxe/g9' }, put('/pxe/a', 1)]), [3], 'a range ends before its end key: no collision')
  t.same(sizes([del('/pxe/a'), del('/pxe/a'), { type: 'delete_prefix', prefix: '/pxe/' }]), [3], 'deletes may overlap each other')
  const ops = [...Array.from({ length: 100 }, (_, i) => del(`/pxe/k/${i}`)), ...Array.from({ length: 100 }, (_, i) => put(`/pxe/k/${i}`, 1))]
  const batches = splitIntoTransactions(FENCE_KEYS, ops, DEFAULT_ETCD_LIMITS)
  t.same(batches.flat(), ops, 'the order is kept')
  for (const batch of batches) {
    const deleted = new Set(batch.flatMap((op) => (op.type === 'delete' ? [op.key] : [])))
    t.notOk(batch.some((op) => op.type === 'put' && deleted.has(op.key)), 'no transaction deletes and puts one key')
  }
})

t.test('a larger --max-txn-ops packs more per transaction; bytes still split', async (t) => {
  const ops = Array.from({ length: 3000 }, (_, i) => put(`/pxe/n/${i}`, 100))
  const big = { ...DEFAULT_ETCD_LIMITS, maxTxnOps: 4096 }
  t.same(splitIntoTransactions(FENCE_KEYS, ops, big).map((b) => b.length), [3000], '3,000 small operations: one transaction')
  t.same(splitIntoTransactions(FENCE_KEYS, ops, { ...big, maxTxnOps: 1000 }).map((b) => b.length), [1000, 1000, 1000])
  const large = Array.from({ length: 100 }, (_, i) => put(`/pxe/n/${i}`, 30_000))
  const sizes = splitIntoTransactions(FENCE_KEYS, large, big).map((b) => b.length)
  t.ok(sizes.length > 1 && sizes.every((n) => n < 100), `3 MB of values: split by bytes (${sizes.join(', ')}), not by count`)
})

t.test('size estimates cover every operation kind', async (t) => {
  t.ok(writeOpBytes({ type: 'put', key: '/pxe/é', value: 'ü' }) >= Buffer.byteLength('/pxe/éü'), 'UTF-8 bytes, not characters')
  t.ok(writeOpBytes({ type: 'delete', key: '/pxe/n/1' }) > 8)
  t.ok(writeOpBytes({ type: 'delete_prefix', prefix: '/pxe/n/' }) > 2 * 7, 'a prefix delete sends the key and the range end')
  t.ok(writeOpBytes({ type: 'delete_range', key: '/pxe/n/', rangeEnd: '/pxe/n/0042' }) > 7 + 11, 'a range delete sends both ends')
})

t.test('read pages stay under the 64 MiB response limit', async (t) => {
  t.equal(pageLimit(DEFAULT_ETCD_LIMITS), 1000, '1,000 entries of up to 64 KiB per page by default')
  t.ok(pageLimit(DEFAULT_ETCD_LIMITS) * (DEFAULT_ETCD_LIMITS.maxEntryBytes + 64) < 64 * 1024 * 1024 - 64 * 1024)
  t.equal(pageLimit({ ...DEFAULT_ETCD_LIMITS, maxResponseBytes: 4 * 1024 * 1024 }), 62, "gRPC's default of 4 MiB would allow 62")
  t.equal(pageLimit({ ...DEFAULT_ETCD_LIMITS, maxEntryBytes: 2048 }), 1000, 'small entries: the page size caps')
  t.equal(pageLimit({ ...DEFAULT_ETCD_LIMITS, maxEntryBytes: 2048 }, 50), 50)
  t.equal(pageLimit({ ...DEFAULT_ETCD_LIMITS, maxEntryBytes: 80 * 1024 * 1024 }), 1, 'never below one entry')
})
