// Fenced writes on a real etcd: applied only under the current leader's fence, refused (as a result,
// not an exception) under a stale one; oversized writes refused locally before anything is sent; large
// logical writes split into several fenced transactions in the caller's order.
import t, { type Test } from 'tap'
import { prefixRangeEnd } from '../../src/ha/etcd-api.js'
import { checkTransaction, DEFAULT_ETCD_LIMITS, EtcdLimitError, type WriteOp } from '../../src/ha/etcd-limits.js'
import { fenceCompares, fencedWrite, fencedWrites } from '../../src/ha/fenced-write.js'
import { readPrefix } from '../../src/ha/paged-read.js'
import { needsEtcd, startEtcdCluster } from '../support/etcd-cluster.js'
import { startReplica, until, type Replica } from './replica.js'

const TTL = 2

async function soleLeader(t: Test, prefix: string): Promise<Replica> {
  const cluster = await startEtcdCluster(t, 1)
  const replica = await startReplica(t, cluster, { id: 'writer', prefix, ttl: TTL })
  await until(() => replica.leadership.isLeader, 4 * TTL * 1000, 'the replica leads')
  return replica
}

const value = async (r: Replica, key: string) => (await r.client.range({ key })).kvs[0]?.value.toString() ?? null

t.test('puts and deletes apply under the fence; a stale fence is refused', needsEtcd(), async (t) => {
  const leader = await soleLeader(t, '/pxe-fw/')
  const fence = leader.leadership.fence()!
  const ok = await fencedWrite(leader.client, fence, [
    { type: 'put', key: '/pxe-fw/nodes/a', value: 'A' },
    { type: 'put', key: '/pxe-fw/nodes/b', value: 'B' },
    { type: 'put', key: '/pxe-fw/generation', value: '7' },
  ])
  t.equal(ok.status, 'committed')
  t.equal(await value(leader, '/pxe-fw/nodes/a'), 'A')
  const removed = await fencedWrite(leader.client, fence, [{ type: 'delete_prefix', prefix: '/pxe-fw/nodes/' }, { type: 'delete', key: '/pxe-fw/none' }])
  t.equal(removed.status, 'committed')
  t.equal(await value(leader, '/pxe-fw/nodes/b'), null, 'a prefix delete removes the keys under it')
  t.equal(await value(leader, '/pxe-fw/generation'), '7', 'and nothing beside it')

  const stale = { ...fence, createRevision: String(BigInt(fence.createRevision) - 1n) }
  const refused = await fencedWrite(leader.client, stale, [{ type: 'put', key: '/pxe-fw/generation', value: '8' }])
  t.equal(refused.status, 'refused', 'another create revision: refused')
  t.match(refused.revision, /^\d+$/, 'with the revision etcd checked at')
  const otherLease = await fencedWrite(leader.client, { ...fence, leaseId: '12345' }, [{ type: 'put', key: '/pxe-fw/generation', value: '8' }])
  t.equal(otherLease.status, 'refused', 'another lease: refused')
  t.equal(await value(leader, '/pxe-fw/generation'), '7', 'refused writes changed nothing')
})

t.test('a refused write makes the leader step down at once, and it campaigns again', needsEtcd(), async (t) => {
  const leader = await soleLeader(t, '/pxe-fw-refused/')
  const fence = leader.leadership.fence()!
  // someone removed the election key (an operator, or etcd expiring the lease)
  await leader.client.txn({ compare: [], success: [{ type: 'delete', key: fence.key }] })
  const res = await fencedWrite(leader.client, fence, [{ type: 'put', key: '/pxe-fw-refused/x', value: '1' }])
  t.equal(res.status, 'refused')
  leader.leadership.fenceRefused(fence)
  t.notOk(leader.leadership.isLeader, 'no longer leader right after fenceRefused')
  t.match(leader.of('stopped')[0]?.reason, /^(fence_refused|key_lost)$/, 'stopped (the watch may have seen the deletion first)')
  await until(() => leader.leadership.isLeader, 4 * TTL * 1000, 'it leads again')
  t.not(leader.leadership.fence()!.createRevision, fence.createRevision, 'under a new fence')
})

t.test('oversized writes are refused locally; the client stays usable', needsEtcd(), async (t) => {
  const leader = await soleLeader(t, '/pxe-fw-big/')
  const fence = leader.leadership.fence()!
  const cases: [string, WriteOp[], EtcdLimitError['code']][] = [
    ['an entry over 64 KiB', [{ type: 'put', key: '/pxe-fw-big/data/a', value: Buffer.alloc(65 * 1024) }], 'entry_too_large'],
    ['129 operations', Array.from({ length: 129 }, (_, i) => ({ type: 'put', key: `/pxe-fw-big/data/${i}`, value: 'x' }) as const), 'too_many_ops'],
    ['1.6 MiB in one transaction', Array.from({ length: 26 }, (_, i) => ({ type: 'put', key: `/pxe-fw-big/data/${i}`, value: Buffer.alloc(63 * 1024) }) as const), 'request_too_large'],
  ]
  for (const [name, ops, code] of cases) {
    await t.rejects(fencedWrite(leader.client, fence, ops), { name: 'EtcdLimitError', code }, name)
  }
  t.same((await readPrefix(leader.client, '/pxe-fw-big/data/')).entries, [], 'nothing was written')
  // what the check lets through, etcd takes: the largest single put our estimate allows
  const limits = { ...DEFAULT_ETCD_LIMITS, maxEntryBytes: DEFAULT_ETCD_LIMITS.maxRequestBytes }
  const keys = fenceCompares(fence).map((c) => c.key)
  const fits = (n: number) => {
    try {
      checkTransaction(keys, [{ type: 'put', key: '/pxe-fw-big/max', value: Buffer.alloc(n) }], limits)
      return true
    } catch {
      return false
    }
  }
  let lo = 0
  let hi = limits.maxRequestBytes
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2)
    if (fits(mid)) lo = mid
    else hi = mid - 1
  }
  t.ok(lo > 1.49 * 1024 * 1024, `the largest put allowed is ${lo} bytes`)
  t.equal((await fencedWrite(leader.client, fence, [{ type: 'put', key: '/pxe-fw-big/max', value: Buffer.alloc(lo) }], limits)).status, 'committed', 'etcd accepts it')
  await t.rejects(fencedWrite(leader.client, fence, [{ type: 'put', key: '/pxe-fw-big/max', value: Buffer.alloc(lo + 1) }], limits), { code: 'request_too_large' }, 'one byte more is refused locally')
  // sent anyway (without our check), etcd itself refuses: the limit is real
  await t.rejects(leader.client.txn({ compare: [], success: [{ type: 'put', key: '/pxe-fw-big/raw', value: Buffer.alloc(1600 * 1024) }] }), 'etcd refuses 1.6 MiB')
  const after = await fencedWrite(leader.client, fence, [{ type: 'put', key: '/pxe-fw-big/after', value: 'ok' }])
  t.equal(after.status, 'committed', 'the next write goes through at once (no circuit breaker tripped)')
  t.ok(leader.leadership.isLeader, 'and leadership was never disturbed')
})

t.test('a large logical write is split into fenced transactions in the given order', needsEtcd(), async (t) => {
  const leader = await soleLeader(t, '/pxe-fw-split/')
  const fence = leader.leadership.fence()!
  const ops: WriteOp[] = Array.from({ length: 300 }, (_, i) => ({ type: 'put', key: `/pxe-fw-split/data/nodes/${String(i).padStart(3, '0')}`, value: Buffer.alloc(10 * 1024, i % 256) }))
  ops.push({ type: 'put', key: '/pxe-fw-split/data/generation', value: '9' })
  const res = await fencedWrites(leader.client, fence, ops)
  t.equal(res.status, 'committed')
  t.ok(res.transactions >= 3, `${res.transactions} transactions`)
  t.equal(res.committed, res.transactions)
  const read = await readPrefix(leader.client, '/pxe-fw-split/data/')
  t.equal(read.entries.length, 301, 'every entry is there')
  const generation = read.entries.find((kv) => kv.key === '/pxe-fw-split/data/generation')!
  const lastNode = read.entries.find((kv) => kv.key === '/pxe-fw-split/data/nodes/299')!
  t.ok(BigInt(generation.modRevision) >= BigInt(lastNode.modRevision), 'the last operation was written last')

  const stale = { ...fence, leaseId: '1' }
  const refused = await fencedWrites(leader.client, stale, ops)
  t.same({ status: refused.status, committed: refused.committed }, { status: 'refused', committed: 0 }, 'a stale fence: the first transaction is refused and the rest not sent')
  const range = await leader.client.range({ key: '/pxe-fw-split/data/', rangeEnd: prefixRangeEnd('/pxe-fw-split/data/'), limit: 1 })
  t.equal(range.revision, read.revision, 'nothing changed in etcd')
})
