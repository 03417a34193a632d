// Fenced writes on a real etcd: applied only under the current leader's fence, refused (as a result,
// not an exception) under a stale one; oversized writes refused locally before anything is sent; large
// logical writes split into several fenced transactions in the caller's order, or by phase: those of one
// phase in flight together, a later phase only after the earlier ones committed.
import t, { type Test } from 'tap'
import { prefixRangeEnd, type EtcdClient } from '../../src/ha/etcd-api.js'
import { checkTransaction, DEFAULT_ETCD_LIMITS, EtcdLimitError, type WriteOp } from '../../src/ha/etcd-limits.js'
import { fenceCompares, fencedPhases, fencedWrite, fencedWrites, PHASE_CONCURRENCY } from '../../src/ha/fenced-write.js'
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

/**
 * The real client, with each transaction's start and end noted (which phases it held, how many were in
 * flight): etcd itself applies them.
 */
function watched(client: EtcdClient, phaseOfKey: (key: string) => number) {
  const log: { phases: number[]; startedWith: number; ended: number[] }[] = []
  let inFlight = 0
  let maxInFlight = 0
  const ended: number[] = []
  const wrapped: EtcdClient = Object.create(client) as EtcdClient
  wrapped.txn = async (request, timeoutMs) => {
    const phases = [...new Set(request.success.map((op) => phaseOfKey(op.key.toString())))]
    log.push({ phases, startedWith: inFlight, ended: [...ended] })
    const index = log.length - 1
    inFlight += 1
    maxInFlight = Math.max(maxInFlight, inFlight)
    try {
      return await client.txn(request, timeoutMs)
    } finally {
      inFlight -= 1
      ended.push(index)
    }
  }
  return { client: wrapped, log, inFlight: () => inFlight, maxInFlight: () => maxInFlight }
}

t.test('phases: the transactions of one phase go together, a later phase only after the earlier ones committed', needsEtcd(), async (t) => {
  const leader = await soleLeader(t, '/pxe-fw-phases/')
  const fence = leader.leadership.fence()!
  const limits = { ...DEFAULT_ETCD_LIMITS, maxTxnOps: 4 }
  const key = (phase: number, i: number) => `/pxe-fw-phases/data/${phase}/${String(i).padStart(2, '0')}`
  const phases: WriteOp[][] = [
    Array.from({ length: 10 }, (_, i) => ({ type: 'put', key: key(0, i), value: 'a' })),
    Array.from({ length: 17 }, (_, i) => ({ type: 'put', key: key(1, i), value: 'b' })),
    [{ type: 'put', key: key(2, 0), value: 'meta' }],
    Array.from({ length: 9 }, (_, i) => ({ type: 'delete', key: key(0, i) })),
  ]
  const w = watched(leader.client, (k) => Number(k.split('/')[3]))
  const res = await fencedPhases(w.client, fence, phases, limits)
  t.same({ status: res.status, committed: res.committed, transactions: res.transactions }, { status: 'committed', committed: 10, transactions: 10 }, '36 operations in 10 transactions of at most 4')
  t.ok(w.maxInFlight() >= 2 && w.maxInFlight() <= PHASE_CONCURRENCY, `up to ${w.maxInFlight()} transactions in flight (at most ${PHASE_CONCURRENCY})`)
  for (const [i, entry] of w.log.entries()) {
    const before = w.log.slice(0, i).map((e, j) => ({ ...e, j })).filter((e) => Math.min(...e.phases) < Math.max(...entry.phases))
    const unfinished = before.filter((e) => !entry.ended.includes(e.j))
    t.same(unfinished.map((e) => e.j), [], `transaction ${i} (phases ${entry.phases.join(', ')}) started once every transaction of an earlier phase had ended`)
  }
  const read = await readPrefix(leader.client, '/pxe-fw-phases/data/')
  t.same(read.entries.map((kv) => kv.key), [key(0, 9), ...Array.from({ length: 17 }, (_, i) => key(1, i)), key(2, 0)], 'etcd holds the whole write')
  t.equal(w.inFlight(), 0)

  const sequential = watched(leader.client, () => 0)
  await fencedWrites(sequential.client, fence, phases.flat(), limits)
  t.equal(sequential.maxInFlight(), 1, 'fencedWrites keeps the caller order: one transaction at a time')
})

t.test('phases: a refusal or a stop ends the write once the transactions in flight ended; nothing is sent after', needsEtcd(), async (t) => {
  const leader = await soleLeader(t, '/pxe-fw-phase-stop/')
  const fence = leader.leadership.fence()!
  const limits = { ...DEFAULT_ETCD_LIMITS, maxTxnOps: 2 }
  const phases: WriteOp[][] = [Array.from({ length: 8 }, (_, i) => ({ type: 'put', key: `/pxe-fw-phase-stop/data/a/${i}`, value: 'x' })), [{ type: 'put', key: '/pxe-fw-phase-stop/data/b', value: 'y' }]]
  const w = watched(leader.client, () => 0)
  const refused = await fencedPhases(w.client, { ...fence, leaseId: '1' }, phases, limits)
  t.same({ status: refused.status, committed: refused.committed }, { status: 'refused', committed: 0 }, 'a stale fence: refused, none committed')
  t.equal(w.log.length, 4, 'the first phase was in flight together; the next phase was never sent')
  t.equal(w.inFlight(), 0, 'and the outcome came once all of them had ended')
  t.same((await readPrefix(leader.client, '/pxe-fw-phase-stop/data/')).entries, [], 'nothing changed in etcd')

  let allowed = 3
  const stopping = watched(leader.client, () => 0)
  await t.rejects(
    fencedPhases(stopping.client, fence, phases, limits, () => {
      if (allowed-- <= 0) throw new Error('term ended')
    }),
    /term ended/,
    'a stop before a transaction rejects the write',
  )
  t.equal(stopping.log.length, 3, 'three transactions were sent, no more')
  t.equal(stopping.inFlight(), 0, 'the rejection came once they had ended')
  t.equal((await readPrefix(leader.client, '/pxe-fw-phase-stop/data/')).entries.length, 6, 'their six puts are in etcd, the meta-like last phase is not')
})

t.test('phases: a transaction that touches a key another in flight touches waits for it', needsEtcd(), async (t) => {
  const leader = await soleLeader(t, '/pxe-fw-phase-key/')
  const fence = leader.leadership.fence()!
  const limits = { ...DEFAULT_ETCD_LIMITS, maxTxnOps: 2 }
  const k = (i: number) => `/pxe-fw-phase-key/data/${i}`
  const phase: WriteOp[] = [
    { type: 'put', key: k(1), value: 'first' },
    { type: 'put', key: k(2), value: 'x' },
    { type: 'delete', key: k(1) },
    { type: 'put', key: k(3), value: 'x' },
  ]
  const w = watched(leader.client, () => 0)
  await fencedPhases(w.client, fence, [phase], limits)
  t.equal(w.maxInFlight(), 1, 'the second transaction deletes a key the first puts: sent after it')
  t.same((await readPrefix(leader.client, '/pxe-fw-phase-key/data/')).entries.map((kv) => kv.key), [k(2), k(3)], 'so the delete came last, as written')
})

t.test('phases: a refusal beside a failed transaction is reported as the refusal (the leader steps down at once)', needsEtcd(), async (t) => {
  const leader = await soleLeader(t, '/pxe-fw-phase-mixed/')
  const fence = leader.leadership.fence()!
  const limits = { ...DEFAULT_ETCD_LIMITS, maxTxnOps: 2 }
  const phase: WriteOp[] = Array.from({ length: 4 }, (_, i) => ({ type: 'put', key: `/pxe-fw-phase-mixed/data/${i}`, value: 'x' }))
  // the second transaction of the phase cannot reach etcd (a timeout, a member gone); the first is refused
  let calls = 0
  const flaky: EtcdClient = Object.create(leader.client) as EtcdClient
  flaky.txn = (request, timeoutMs) => (++calls === 2 ? Promise.reject(new Error('deadline exceeded')) : leader.client.txn(request, timeoutMs))
  const res = await fencedPhases(flaky, { ...fence, leaseId: '1' }, [phase], limits)
  t.equal(calls, 2, 'both were in flight together')
  t.same({ status: res.status, committed: res.committed }, { status: 'refused', committed: 0 }, 'refused, not the error')
  calls = 0
  await t.rejects(fencedPhases(flaky, fence, [phase], limits), /deadline exceeded/, 'without a refusal the error is thrown')
})
