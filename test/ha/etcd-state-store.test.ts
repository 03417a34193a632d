// The etcd state store on a real etcd: what a controller writes (deltas, a large change split over
// several transactions, a reconcile after a write that stopped half-way) is read back by a fresh store
// exactly as the controller's snapshot; a leader stopped after any transaction of a split write leaves a
// state its successor can safely start from; handoffs written one key per shard by earlier releases load
// and become runs; a deposed leader's write is refused and leaves nothing behind; a bad value stops the
// load with a message naming the key.
import t, { type Test } from 'tap'
import { Controller } from '../../src/core/controller.js'
import { EtcdClientError, prefixRangeEnd, type EtcdClient } from '../../src/ha/etcd-api.js'
import { DEFAULT_ETCD_LIMITS } from '../../src/ha/etcd-limits.js'
import { EtcdStateStore } from '../../src/ha/etcd-state-store.js'
import { EtcdStateError, FencedWriteRefused, NotLeading } from '../../src/ha/ha-errors.js'
import type { Fence } from '../../src/ha/leader-election.js'
import { encodeHandoff, StateLayout } from '../../src/ha/state-layout.js'
import type { DurableState } from '../../src/core/durable-state.js'
import { body, cert, checkIn, claimAnswered, T0 } from '../core/fixtures.js'
import { needsEtcd, startEtcdCluster, type EtcdCluster } from '../support/etcd-cluster.js'
import { startReplica, until, type Replica } from './replica.js'

const TTL = 2
const SETTINGS = { totalShards: 4096, maxConcurrency: 16, leaseSeconds: 30, identifyIntervalMs: 5100, dailyIdentifyLimit: 1000 }

async function leader(t: Test, cluster: EtcdCluster, prefix: string, id = 'writer'): Promise<Replica> {
  const replica = await startReplica(t, cluster, { id, prefix, ttl: TTL })
  await until(() => replica.leadership.isLeader, 4 * TTL * 1000, `${id} leads`)
  return replica
}

function storeOf(r: Replica, prefix: string, extra: Partial<ConstructorParameters<typeof EtcdStateStore>[0]> = {}): EtcdStateStore {
  const fence = r.leadership.fence()!
  return new EtcdStateStore({ client: r.client, prefix, fence, currentFence: () => r.leadership.fence(), ...extra })
}

/** Writes what the controller changed since the last write, as the durable writer does. */
const writeChanges = (store: EtcdStateStore, c: Controller, whole = false) => {
  c.settle()
  return store.write(c.takeDelta(), () => c.snapshot(), whole)
}

const revision = async (client: EtcdClient) => BigInt((await client.range({ key: '/', limit: 1 })).revision)
const keysUnder = async (client: EtcdClient, prefix: string) =>
  (await client.range({ key: prefix, rangeEnd: prefixRangeEnd(prefix) })).kvs.map((kv) => kv.key)

t.test('round trip: deltas, a large change in several transactions, grants; a fresh load equals the snapshot', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const prefix = '/pxe-store/'
  const r = await leader(t, cluster, prefix)
  const store = storeOf(r, prefix)
  t.equal(await store.load(), null, 'nothing stored yet')

  const c = new Controller(SETTINGS)
  let now = T0
  checkIn(c, now, body('alpha', 16), cert('a1'))
  checkIn(c, now, body('beta', 16), cert('b1'))
  await writeChanges(store, c) // the term's first write: a reconcile against the empty prefix
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'the first write')

  const before = await revision(r.client)
  for (let i = 0; i < 600; i++) c.register(now, body(`node-${String(i).padStart(3, '0')}`, 4), cert(`c${i}`))
  await writeChanges(store, c)
  const transactions = Number((await revision(r.client)) - before)
  t.ok(transactions >= 5, `600 joins were split over ${transactions} transactions (128 operations each at most)`)
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'after the large change')

  now += 1000
  const owned = c.plan(now).nodes.find((n) => n.nodeId === 'node-000')!
  t.match(claimAnswered(c, now, { node_id: 'node-000', shard_id: owned.rangeStart }), { granted: true })
  c.setDraining(now, 'alpha', true, true) // every range shifts: handoffs from the live previous owners
  checkIn(c, now, body('node-001', 4, { generation: c.generation }), cert('c1'))
  for (let i = 300; i < 600; i++) c.removeRevoked(now, (serial) => serial === `c${i}`)
  await writeChanges(store, c)
  const snapshot = c.snapshot()
  t.same(await storeOf(r, prefix).load(), snapshot, 'a grant, drains, reports, handoffs and removals')
  t.equal(snapshot.dailyGrants.length, 1, 'the grant is counted')
  t.same(snapshot.draining, ['alpha'])
  t.ok(snapshot.handoffs.length > 100, `${snapshot.handoffs.length} pending handoffs round-trip`)

  now += 86_400_000 // every other node expires; the grant leaves the daily window
  checkIn(c, now, body('beta', 16), cert('b1'))
  t.match(claimAnswered(c, now, { node_id: 'beta', shard_id: 0 }), { granted: true })
  await writeChanges(store, c)
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'after the expiries')
  t.same(c.snapshot().dailyGrants, [now], 'the expired grant was dropped, the new one kept')
  t.equal((await keysUnder(r.client, `${prefix}state/grant/`)).length, 1, 'one grant key in etcd')
})

t.test('a deposed leader: its write is refused, reported, and nothing of it is visible', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const prefix = '/pxe-store-deposed/'
  const old = await leader(t, cluster, prefix, 'old')
  const oldFence: Fence = old.leadership.fence()!
  const refusals: FencedWriteRefused[] = []
  // as a process frozen past its deadline sees it: it still believes it holds `oldFence`
  const stale = storeOf(old, prefix, { currentFence: () => oldFence, onRefused: (err) => refusals.push(err) })
  const c = new Controller(SETTINGS)
  checkIn(c, T0, body('alpha', 8), cert('a1'))
  await writeChanges(stale, c)
  const saved = c.snapshot()

  const next = await startReplica(t, cluster, { id: 'next', prefix, ttl: TTL })
  await old.client.revokeLease(oldFence.leaseId) // the old term ends (as when its lease expires)
  await until(() => next.leadership.isLeader, 4 * TTL * 1000, 'the next replica leads')

  for (let i = 0; i < 300; i++) c.register(T0, body(`late-${i}`, 8), cert(`d${i}`))
  await t.rejects(writeChanges(stale, c), FencedWriteRefused, 'the stale write is refused')
  t.equal(refusals.length, 1, 'and reported once')
  t.equal(refusals[0]!.committedTransactions, 0, 'no transaction of it committed')
  t.same(await storeOf(next, prefix).load(), saved, 'the new leader loads the last state the old one wrote')

  const ended = storeOf(next, prefix, { currentFence: () => null })
  await t.rejects(ended.write(c.takeDelta(), () => c.snapshot()), NotLeading, 'a store whose term ended sends nothing')
})

/**
 * A leader on a one-member etcd whose store writes transactions of at most 16 operations, and whose term
 * "ends" once `allow(n)` more transactions went through (until `allow(Infinity)`).
 */
async function tearableStore(t: Test, prefix: string): Promise<{ r: Replica; store: EtcdStateStore; allow: (transactions: number) => void }> {
  const cluster = await startEtcdCluster(t, 1)
  const r = await leader(t, cluster, prefix)
  let allowed = Infinity
  const current = () => (allowed-- > 0 ? r.leadership.fence() : null)
  const store = storeOf(r, prefix, { currentFence: current, limits: { ...DEFAULT_ETCD_LIMITS, maxTxnOps: 16 } })
  return { r, store, allow: (transactions) => (allowed = transactions) }
}

t.test('a write that stops half-way is made whole by the next (reconciling) write', needsEtcd(), async (t) => {
  const prefix = '/pxe-store-torn/'
  const { r, store, allow } = await tearableStore(t, prefix)
  const c = new Controller(SETTINGS)
  checkIn(c, T0, body('alpha', 64), cert('a1'))
  await writeChanges(store, c)
  for (let i = 0; i < 60; i++) c.register(T0, body(`n-${i}`, 8), cert(`e${i}`))
  allow(2) // the leader's term "ends" after two transactions of the large write
  await t.rejects(writeChanges(store, c), NotLeading, 'the write stopped after two transactions')
  const torn = await storeOf(r, prefix).load()
  t.not(JSON.stringify(torn), JSON.stringify(c.snapshot()), 'etcd holds a part of it')
  t.equal(torn!.meta.generation, 1, 'without the meta that would make it current')

  allow(Infinity)
  checkIn(c, T0 + 10, body('alpha', 64, { generation: 1 }), cert('a1')) // more changes meanwhile
  await writeChanges(store, c, true)
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'the reconcile wrote the difference: etcd equals the snapshot')
  await writeChanges(store, c)
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'and deltas go on from there')
})

t.test('a reconcile after a drain torn after its first transaction puts the runs back over their invisible copies (etcd would refuse a delete and a put of one key in one transaction)', needsEtcd(), async (t) => {
  const prefix = '/pxe-store-torn-runs/'
  const { r, store, allow } = await tearableStore(t, prefix)
  const c = new Controller({ ...SETTINGS, totalShards: 1024 })
  for (let i = 0; i < 32; i++) c.register(T0, body(`node-${String(i).padStart(2, '0')}`, 64), cert(`c${i}`))
  await writeChanges(store, c, true)
  // A grant goes first in the next write's first transaction, so the runs after it do not fill whole
  // transactions: the reconcile's deletes of their invisible copies would share one with their puts.
  t.match(claimAnswered(c, T0 + 1, { node_id: 'node-00', shard_id: 0 }), { granted: true })
  c.setDraining(T0 + 1, 'node-05', true, true) // every range after node-05 shifts: a run from each of 26 nodes
  allow(1)
  await t.rejects(writeChanges(store, c), NotLeading, 'the drain stopped after its first transaction')
  const runsLeft = (await keysUnder(r.client, `${prefix}state/handoff-run/`)).length
  t.equal(runsLeft, 15, `the grant and ${runsLeft} runs of the new generation are in etcd, invisible without the meta`)
  allow(Infinity)
  await writeChanges(store, c, true)
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'the reconcile went through: etcd equals the snapshot')
})

const SPLIT_SETTINGS = { ...SETTINGS, totalShards: 1024, dailyIdentifyLimit: null }

/** 32 nodes, node-05 drained (shards wait for their previous owners): the same state on every call. */
function drainedFleet(): Controller {
  const c = new Controller(SPLIT_SETTINGS)
  for (let i = 0; i < 32; i++) c.register(T0, body(`node-${String(i).padStart(2, '0')}`, 64), cert(`f${i}`))
  c.settle()
  c.setDraining(T0 + 1, 'node-05', true, true)
  c.settle()
  return c
}

/**
 * Per shard, the node that may be running it in `state`: the node its handoff waits for (its owner could
 * not identify it meanwhile), or else its owner.
 */
function runnersOf(state: DurableState): Map<number, string> {
  const c = new Controller(SPLIT_SETTINGS, { state, now: T0 + 2 })
  const runners = new Map<number, string>()
  for (let shardId = 0; shardId < SPLIT_SETTINGS.totalShards; shardId++) runners.set(shardId, c.ownerOf(shardId)!)
  for (const h of state.handoffs) runners.set(h.shardId, h.fromNode)
  return runners
}

t.test('a leader stopped after any transaction of a split write leaves a state its successor can safely start from', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const prefix = '/pxe-store-split/'
  const r = await leader(t, cluster, prefix)
  const limits = { ...DEFAULT_ETCD_LIMITS, maxTxnOps: 16 }
  const before = drainedFleet().snapshot()
  const runners = runnersOf(before)
  t.ok(before.handoffs.length > 100, `${before.handoffs.length} shards wait for their previous owners before the write`)
  let transactions = Infinity
  let partsChecked = 0
  for (let k = 0; k <= transactions; k++) {
    let allowed = Infinity
    const store = storeOf(r, prefix, { currentFence: () => (allowed-- > 0 ? r.leadership.fence() : null), limits })
    const c = drainedFleet()
    c.takeDelta()
    await store.write(c.takeDelta(), () => before, true) // etcd holds `before` exactly (a reconcile)
    // node-05 comes back (shards return to the node they wait for: parts of runs released) and node-20 is
    // drained (new runs); node-07 reports the generation (its runs released)
    c.setDraining(T0 + 2, 'node-05', false)
    c.setDraining(T0 + 2, 'node-20', true, true)
    checkIn(c, T0 + 2, body('node-07', 64, { generation: c.generation }), cert('f7'))
    const rev0 = await revision(r.client)
    allowed = k
    const outcome = await writeChanges(store, c).then(
      () => 'whole',
      (err: unknown) => (err instanceof NotLeading ? 'stopped' : Promise.reject(err)),
    )
    const committed = Number((await revision(r.client)) - rev0)
    if (outcome === 'whole') transactions = committed
    t.equal(committed, Math.min(k, transactions), `stopped after ${k} transactions: ${committed} committed`)
    const loaded = await storeOf(r, prefix).load()
    t.ok(loaded!.meta.generation >= before.meta.generation, 'the generation does not go back')
    const after = new Controller(SPLIT_SETTINGS, { state: loaded!, now: T0 + 3 })
    const exposed: number[] = []
    for (const [shardId, runner] of runners) {
      const owner = after.ownerOf(shardId)
      if (owner === null || runner === owner) continue
      if (runner === 'node-07' && c.ownerOf(shardId) !== 'node-07') continue // it applied the new plan: stopped
      const claim = after.claimIdentify(T0 + 3, { node_id: owner, shard_id: shardId }, after.certSerialOf(owner) ?? "")
      if (!(claim.granted === false && claim.reason === 'handoff_pending')) exposed.push(shardId)
    }
    t.same(exposed, [], `after ${committed} transaction(s): every shard a node may still run is held back from its new owner`)
    if (outcome === 'whole') t.same(loaded, c.snapshot(), 'the whole write loads as the snapshot')
    partsChecked += 1
  }
  t.ok(transactions >= 4, `the write took ${transactions} transactions of at most 16 operations; all ${partsChecked} stopping points checked`)
})

t.test('handoffs stored one key per shard (earlier releases) load, and the next reconcile turns them into runs', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const prefix = '/pxe-store-legacy/'
  const r = await leader(t, cluster, prefix)
  const layout = new StateLayout(prefix)
  const c = drainedFleet()
  const state = c.snapshot()
  c.takeDelta()
  await storeOf(r, prefix).write(c.takeDelta(), () => state, true)
  // as a controller of an earlier release left it: the same state, a key per pending handoff
  const runKeys = await keysUnder(r.client, `${prefix}state/handoff-run/`)
  const ops = [
    { type: 'delete' as const, key: `${prefix}state/handoff-run/`, rangeEnd: prefixRangeEnd(`${prefix}state/handoff-run/`) },
    ...state.handoffs.map((h) => ({ type: 'put' as const, key: layout.legacyHandoff(h.shardId, h.generation), value: encodeHandoff(h) })),
  ]
  for (let i = 0; i < ops.length; i += 100) await r.client.txn({ compare: [], success: ops.slice(i, i + 100) })
  t.equal((await keysUnder(r.client, `${prefix}state/handoff/`)).length, state.handoffs.length, `${state.handoffs.length} per-shard keys`)
  t.same(await storeOf(r, prefix).load(), state, 'they load as the same state')

  const next = storeOf(r, prefix) // a new term: its first write reconciles
  checkIn(c, T0 + 2, body('node-09', 64, { generation: c.generation }), cert('f9'))
  await writeChanges(next, c)
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'after the reconcile: the same state')
  t.same(await keysUnder(r.client, `${prefix}state/handoff/`), [], 'no per-shard key is left')
  const runs = await keysUnder(r.client, `${prefix}state/handoff-run/`)
  t.ok(runs.length > 0 && runs.length <= runKeys.length, `${runs.length} run keys hold ${c.snapshot().handoffs.length} handoffs`)
})

t.test('the load refuses what it cannot use, naming the key; a first write that never completed is no state', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const prefix = '/pxe-store-bad/'
  const r = await leader(t, cluster, prefix)
  const store = storeOf(r, prefix)
  const put = (key: string, value: string) => r.client.txn({ compare: [], success: [{ type: 'put', key: `${prefix}state/${key}`, value }] })
  const node = (fields: Record<string, unknown>) =>
    JSON.stringify({ nodeId: 'alpha', capacity: 8, reportedGeneration: null, certSerial: 'a1', certNotBefore: 0, readyShards: 0, startingShards: 0, backoffShards: 0, fatalShards: 0, ...fields })
  await put('node/alpha', node({}))
  t.equal(await store.load(), null, 'records without a meta key (a first write cut short): no state')

  const c = new Controller(SETTINGS)
  checkIn(c, T0, body('beta', 8), cert('b1'))
  await writeChanges(store, c)
  t.same(await storeOf(r, prefix).load(), c.snapshot(), "the reconcile removed the other write's leftovers")

  const cases: [string, string, string, RegExp][] = [
    ['a capacity out of range', 'node/beta', node({ nodeId: 'beta', capacity: 999 }), /key \/pxe-store-bad\/state\/node\/beta is not a valid node record: capacity: .*128/],
    ['another node under a key', 'node/beta', node({}), /holds the record of another node \(alpha\)/],
    ['not JSON', 'node/beta', '{"nodeId": "be', /node\/beta does not hold JSON/],
    ['an unknown key', 'nodes/x', '', /nodes\/x is not a key this controller writes/],
    ['a value on a drain flag', 'draining/beta', 'yes', /draining\/beta must have an empty value/],
    ['a bad meta', 'meta', '{"version":2,"meta":{"generation":-1}}', /state\/meta is not a valid state meta: meta\.generation/],
  ]
  for (const [name, key, value, message] of cases) {
    const before = await keysUnder(r.client, `${prefix}state/`)
    await put(key, value)
    const err = (await store.load().catch((e: unknown) => e)) as EtcdStateError
    t.type(err, EtcdStateError, name)
    t.match(err.message, message, `${name}: the message says what and where`)
    t.match(err.message, /Nothing in etcd was changed/)
    // put the good state back for the next case
    await r.client.txn({ compare: [], success: [{ type: 'delete', key: `${prefix}state/`, rangeEnd: prefixRangeEnd(`${prefix}state/`) }] })
    c.register(T0, body('beta', 9), cert('b1'))
    await writeChanges(store, c, true)
    t.same(await keysUnder(r.client, `${prefix}state/`), before, `${name}: cleaned up`)
  }
})

t.test("a term's first write reconciles against what its load read, without reading etcd again", needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const prefix = '/pxe-store-loaded/'
  const r = await leader(t, cluster, prefix)
  const c = drainedFleet()
  await writeChanges(storeOf(r, prefix), c, true) // the previous term's state, handoff runs included
  let ranges = 0
  const counting = new Proxy(r.client, {
    get(target, name, receiver) {
      if (name === 'range') return (...args: Parameters<EtcdClient['range']>) => (ranges++, target.range(...args))
      const value = Reflect.get(target, name, receiver)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  const next = storeOf(r, prefix, { client: counting }) // a new term: it loads, then writes
  t.same(await next.load(), c.snapshot(), 'the new term loads the state')
  const read = ranges
  checkIn(c, T0 + 2, body('node-09', 64, { generation: c.generation }), cert('f9'))
  c.setDraining(T0 + 2, 'node-03', true, true)
  await writeChanges(next, c)
  t.equal(ranges, read, 'its first write read nothing more from etcd')
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'and etcd equals the snapshot after it')
  await writeChanges(next, c)
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'deltas go on from there')

  // After a write, a reconcile reads etcd again: the load's snapshot is stale by then.
  checkIn(c, T0 + 3, body('node-08', 64, { generation: c.generation }), cert('f8'))
  await writeChanges(next, c, true)
  t.ok(ranges > read, 'a later reconcile (whole) read etcd again')
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'and etcd equals the snapshot')
})

/** `client` with its transactions counted (the calls go to etcd unchanged). */
function countingTxns(client: EtcdClient): { client: EtcdClient; txns: () => number } {
  let txns = 0
  const counting = new Proxy(client, {
    get(target, name, receiver) {
      if (name === 'txn') return (...args: Parameters<EtcdClient['txn']>) => (txns++, target.txn(...args))
      const value = Reflect.get(target, name, receiver)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  return { client: counting, txns: () => txns }
}

t.test('with etcd at --max-txn-ops 4096 and max_txn_ops 4096, a change of hundreds of operations is one transaction', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1, { maxTxnOps: 4096 })
  const prefix = '/pxe-store-big-txn/'
  const r = await leader(t, cluster, prefix)
  const { client, txns } = countingTxns(r.client)
  const store = storeOf(r, prefix, { client, limits: { ...DEFAULT_ETCD_LIMITS, maxTxnOps: 4096 } })
  const c = new Controller(SETTINGS)
  checkIn(c, T0, body('alpha', 16), cert('a1'))
  await writeChanges(store, c)
  const before = txns()
  for (let i = 0; i < 600; i++) c.register(T0, body(`node-${String(i).padStart(3, '0')}`, 4), cert(`c${i}`))
  await writeChanges(store, c)
  t.equal(txns() - before, 1, '600 joins (node records and the generation) went out as one transaction')
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'and etcd equals the snapshot')
  c.setDraining(T0 + 1000, 'alpha', true, true) // handoff runs, records and the generation: phases that were separate round trips
  await writeChanges(store, c)
  t.equal(txns() - before, 2, 'a drain that moves every range: one transaction too')
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'and etcd equals the snapshot after it')
})

t.test('max_txn_ops above what etcd allows: etcd refuses the transaction, the store drops to 128 per transaction and sends the write again', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1) // etcd's default --max-txn-ops, 128
  const prefix = '/pxe-store-txn-ops/'
  const r = await leader(t, cluster, prefix)
  const lowered: [number, number, string][] = []
  const store = storeOf(r, prefix, { limits: { ...DEFAULT_ETCD_LIMITS, maxTxnOps: 4096 }, onTxnOpsLowered: (from, to, err) => lowered.push([from, to, err.kind]) })
  const c = new Controller(SETTINGS)
  checkIn(c, T0, body('alpha', 16), cert('a1'))
  await writeChanges(store, c)
  t.same(lowered, [], 'a small write fits either way')
  for (let i = 0; i < 600; i++) c.register(T0, body(`node-${String(i).padStart(3, '0')}`, 4), cert(`c${i}`))
  await writeChanges(store, c)
  t.same(lowered, [[4096, 128, 'too_many_ops']], 'the 601-operation transaction was refused: reported once, with the numbers')
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'the same write, sent again in 128-operation transactions, is in etcd')
  c.setDraining(T0 + 1000, 'alpha', true, true)
  await writeChanges(store, c)
  t.same(await storeOf(r, prefix).load(), c.snapshot(), 'later writes go out at 128 from the start')
  t.equal(lowered.length, 1, 'and are not refused')
  const client = new Proxy(r.client, {
    get(target, name, receiver) {
      if (name === 'txn') return () => Promise.reject(new EtcdClientError('too_many_ops', 'etcdserver: too many operations in txn request'))
      const value = Reflect.get(target, name, receiver)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  const floor = storeOf(r, prefix, { client, limits: { ...DEFAULT_ETCD_LIMITS, maxTxnOps: 16 } })
  await floor.load()
  checkIn(c, T0 + 2000, body('beta', 16), cert('b1'))
  await t.rejects(writeChanges(floor, c), { name: 'EtcdClientError', kind: 'too_many_ops' }, 'at the floor (16) a refusal is an ordinary write failure, not a loop')
})
