// A leader whose event loop is busy (a fleet's check-ins: loop turns of half a second) keeps its lease on
// a real etcd: a renewal etcd answered in time counts even when the answer is read late, so neither the
// keepalive's timeout nor the renew deadline fires before the answer waiting in the socket is read. The
// safety side stays: a loop blocked past the renew deadline (2/3 of the TTL) ends the term on waking.
// The controller renews on a thread of its own (lease-keeper.ts), with which far longer turns keep the
// term; a loop stuck for longer than one TTL still loses it (the tests after the first two).
import t, { type Test } from 'tap'
import { performance } from 'node:perf_hooks'
import { needsEtcd, startEtcdCluster } from '../support/etcd-cluster.js'
import { ThreadLeaseKeeper, type LeaseKeeper } from '../../src/ha/lease-keeper.js'
import { startReplica, until } from './replica.js'

const TTL = 2 // renew deadline 1,333 ms, keepalive timeout and interval 333 ms
// (Without the keeper thread a renewal takes two loop turns when the loop is that busy: its write waits
// for a turn, its answer for the next. Turns up to about half the renew deadline are survived; longer
// ones end the term.)

/** Blocks the event loop for `ms` (what a saturated controller's loop turn does to its timers). */
function block(ms: number): void {
  const end = performance.now() + ms
  while (performance.now() < end) {
    // busy: no timer, no I/O callback runs
  }
}

/** Loop turns of `turnMs` of blocking each, for `forMs`: one poll phase (I/O read) between turns. */
async function busyLoop(turnMs: number, forMs: number): Promise<number> {
  const end = performance.now() + forMs
  let turns = 0
  // Each turn blocks in the loop's check phase (as an I/O callback would in the poll phase), so that
  // the timers and the I/O of the renewals get their phases between turns.
  while (performance.now() < end) {
    await new Promise((resolve) => setImmediate(resolve))
    block(turnMs)
    turns++
  }
  return turns
}

t.test('a leader whose loop turns take 500 ms (longer than the keepalive timeout) keeps leading', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const leader = await startReplica(t, cluster, { id: 'busy', prefix: '/pxe-busy-leader/', ttl: TTL })
  await until(() => leader.leadership.isLeader, 30_000, 'the replica leads')
  const fence = leader.leadership.fence()!

  const turns = await busyLoop(500, 8000)
  t.ok(turns >= 10, `${turns} loop turns of 500 ms`)
  t.same(leader.of('stopped'), [], 'it never stepped down')
  t.ok(leader.leadership.isLeader, 'it still leads')
  t.same(leader.leadership.fence(), fence, 'in the same term')
  const client = await cluster.client(t)
  const key = await client.range({ key: fence.key })
  t.equal(key.kvs.length, 1, 'its election key (held by its lease) is still in etcd')
})

t.test('a leader whose loop is blocked past the renew deadline stops leading on waking', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const leader = await startReplica(t, cluster, { id: 'stuck', prefix: '/pxe-stuck-leader/', ttl: TTL })
  await until(() => leader.leadership.isLeader, 30_000, 'the replica leads')
  block(1600)
  t.notOk(leader.leadership.isLeader, 'the first question after waking finds the term over')
  t.equal(leader.of('stopped')[0]?.reason, 'renew_deadline', 'it stepped down for its renew deadline')
})

/**
 * A leader on a 1-member etcd whose lease is renewed by the keeper thread, once that thread runs (until
 * then its own thread renews, and the tests' turns would have to stay short); with the etcd cluster.
 */
async function keptLeader(t: Test, id: string) {
  const cluster = await startEtcdCluster(t, 1)
  const leader = await startReplica(t, cluster, { id, prefix: `/pxe-${id}-leader/`, ttl: TTL, keeper: true })
  await until(() => leader.leadership.isLeader, 30_000, 'the replica leads')
  await leader.keeper!.ready()
  return { cluster, leader, fence: leader.leadership.fence()! }
}

// The controller renews on a thread of its own (lease-keeper.ts): loop turns far longer than a renewal
// could wait on the same loop, even longer than the renew deadline, cost it nothing.
t.test('with the lease keeper thread, loop turns of 1.5 s (past the renew deadline) keep the term', needsEtcd(), async (t) => {
  const { cluster, leader, fence } = await keptLeader(t, 'kept')
  const turns = await busyLoop(1500, 9000)
  t.ok(turns >= 4, `${turns} loop turns of 1.5 s`)
  t.same(leader.of('stopped'), [], 'it never stepped down')
  t.same(leader.leadership.fence(), fence, 'it still leads, in the same term')
  const client = await cluster.client(t)
  t.equal((await client.range({ key: fence.key })).kvs.length, 1, 'its election key is still in etcd')
})

t.test('with the keeper thread, a loop stuck for longer than the TTL loses the term: the thread stops renewing', needsEtcd(), async (t) => {
  const { cluster, leader, fence } = await keptLeader(t, 'hung')
  const client = await cluster.client(t)
  // Stuck: no heartbeat for one TTL (2 s), after which the thread renews no more, then the deadline. Had
  // the thread renewed on (as it does through the 1.5 s turns above), the term would still stand on waking.
  block(4000)
  t.notOk(leader.leadership.isLeader, 'on waking it no longer leads')
  t.equal(leader.of('stopped')[0]?.reason, 'renew_deadline', 'it stepped down for its renew deadline')
  await until(async () => (await client.range({ key: fence.key })).kvs.length === 0, 10_000, 'the old term\'s election key is gone')
  t.pass('the old term\'s election key is gone from etcd')
})

// A loop turn that serves requests is busy, not stuck: at 10,000 nodes one poll phase of a drain's deposits
// and claims ran over 2 s without a timer firing, and the timer's heartbeat alone cost the leader its term.
// The same 4 s turn as above, but showing life as each request served does (HaServiceHost.serve).
t.test('with the keeper thread, one 4 s loop turn that serves requests (each showing life) keeps the term', needsEtcd(), async (t) => {
  const { cluster, leader, fence } = await keptLeader(t, 'serving')
  const keeper = leader.keeper as ThreadLeaseKeeper
  const end = performance.now() + 4000
  let served = 0
  while (performance.now() < end) {
    block(5) // one request's work
    keeper.showLife()
    served++
  }
  t.ok(served > 100, `${served} requests served in one turn`)
  t.ok(leader.leadership.isLeader, 'on finishing the turn it still leads')
  t.same(leader.leadership.fence(), fence, 'in the same term')
  await new Promise((resolve) => setTimeout(resolve, TTL * 1000))
  t.same(leader.of('stopped'), [], 'and goes on leading: the thread never stopped renewing')
  const client = await cluster.client(t)
  t.equal((await client.range({ key: fence.key })).kvs.length, 1, 'its election key is still in etcd')
})

// A stall between one and two TTLs: the thread sees the heartbeat a TTL old and stops renewing, for good.
// Its last renewal went out late in the stall, so the term still stands on waking; had the thread
// resumed renewing with the heartbeat, it would stand on (a stall of up to two TTLs kept the term).
t.test('with the keeper thread, a loop stuck for 1.25 TTL loses the term soon after waking: the thread does not resume', needsEtcd(), async (t) => {
  const { cluster, leader, fence } = await keptLeader(t, 'stalled')
  block(TTL * 1250)
  await until(() => !leader.leadership.isLeader, TTL * 1000, 'the term ends within one TTL of waking')
  t.equal(leader.of('stopped')[0]?.reason, 'renew_deadline', 'it stepped down for its renew deadline')
  t.ok(leader.errors.some((e) => /showed no life for one TTL/.test(e.message)), 'the thread said why it stopped renewing')
  const client = await cluster.client(t)
  await until(async () => (await client.range({ key: fence.key })).kvs.length === 0, 10_000, 'the old term\'s election key is gone')
  t.pass('the old term\'s election key is gone from etcd')
})

// A campaign does not wait for the keeper's thread: under load its start-up took over a second, and a
// standby whose election key is not yet in etcd cannot take over (ha-frozen-leader: 6.3 s instead of 2).
// Until the thread runs, this thread renews; then it hands the lease over, its last renewal's age with it.
t.test('a lease is granted and renewed before the keeper thread runs, then handed over to it', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const real = new ThreadLeaseKeeper(cluster.connection)
  t.teardown(() => real.close())
  let release!: () => void
  const held = new Promise<void>((resolve) => (release = resolve))
  const kept: { leaseId: string; ageMs: number }[] = []
  const slow: LeaseKeeper = {
    ready: () => held.then(() => real.ready()),
    isReady: () => false,
    keep: (leaseId, timing, sentAt, hooks) => {
      kept.push({ leaseId, ageMs: Number(process.hrtime.bigint() - sentAt) / 1e6 })
      return real.keep(leaseId, timing, sentAt, hooks)
    },
    close: () => real.close(),
  }
  const leader = await startReplica(t, cluster, { id: 'early', prefix: '/pxe-early-leader/', ttl: TTL, keeper: slow })
  await until(() => leader.leadership.isLeader, 30_000, 'the replica leads while its keeper is held back')
  const fence = leader.leadership.fence()!
  await new Promise((resolve) => setTimeout(resolve, 3 * TTL * 1000)) // three TTLs: renewed by this thread
  t.same(leader.of('stopped'), [], 'it kept its term with no keeper running')
  t.same(kept, [], 'nothing was handed to the keeper yet')
  release()
  await until(() => kept.length === 1, 10_000, 'the lease is handed over')
  t.equal(kept[0]!.leaseId, fence.leaseId, 'the term\'s lease was handed over')
  t.ok(kept[0]!.ageMs >= 0 && kept[0]!.ageMs < 1000, `with its last renewal's age (${kept[0]!.ageMs.toFixed(0)} ms)`)
  const turns = await busyLoop(1500, 6000) // only the keeper's thread renews through turns this long
  t.ok(turns >= 3, `${turns} loop turns of 1.5 s`)
  t.same(leader.of('stopped'), [], 'it never stepped down')
  t.same(leader.leadership.fence(), fence, 'it still leads, in the same term')
})
