// A leader that loses etcd (stopped, or frozen and so silent) steps down on its own within the TTL, before
// etcd could elect anyone else, and leads again with a new lease once etcd is back.
import t, { type Test } from 'tap'
import { performance } from 'node:perf_hooks'
import { fencedWrite } from '../../src/ha/fenced-write.js'
import { needsEtcd, startEtcdCluster, type EtcdCluster } from '../support/etcd-cluster.js'
import { startReplica, until, type Replica } from './replica.js'

const TTL = 3

/** Takes etcd away, checks the step-down, brings etcd back, checks the new term. */
async function outage(t: Test, replica: Replica, away: () => Promise<void>, back: () => Promise<void>): Promise<void> {
  await until(() => replica.leadership.isLeader, 4 * TTL * 1000, 'the replica leads')
  const before = replica.leadership.fence()!
  const lostAt = performance.now()
  await away()
  await until(() => replica.of('stopped').some((e) => e.at > lostAt), 2 * TTL * 1000, 'the leader steps down')
  const stop = replica.of('stopped').find((e) => e.at > lostAt)!
  t.equal(stop.reason, 'renew_deadline', 'it stepped down because no renewal succeeded in time')
  t.ok(stop.at - lostAt < TTL * 1000, `it stepped down ${(stop.at - lostAt).toFixed(0)} ms after etcd went away (bound: the TTL, ${TTL * 1000} ms)`)
  t.notOk(replica.leadership.isLeader, 'it no longer leads')
  t.equal(replica.leadership.fence(), null, 'it holds no fence')
  await back()
  await until(() => replica.leadership.isLeader, 4 * TTL * 1000, 'the replica leads again')
  const after = replica.leadership.fence()!
  t.not(after.leaseId, before.leaseId, 'the new term has a new lease')
  t.equal((await fencedWrite(replica.client, before, [{ type: 'put', key: '/pxe-outage/x', value: 'old' }])).status, 'refused', 'the old fence is refused')
  t.equal((await fencedWrite(replica.client, after, [{ type: 'put', key: '/pxe-outage/x', value: 'new' }])).status, 'committed', 'the new one writes')
}

t.test('etcd stopped, then restarted', needsEtcd(), async (t) => {
  const cluster: EtcdCluster = await startEtcdCluster(t, 1)
  const replica = await startReplica(t, cluster, { id: 'solo', prefix: '/pxe-outage/', ttl: TTL })
  await outage(t, replica, () => cluster.stop(0), () => cluster.restart(0))
})

t.test('etcd frozen (calls hang), then woken', needsEtcd(), async (t) => {
  const cluster: EtcdCluster = await startEtcdCluster(t, 1)
  const replica = await startReplica(t, cluster, { id: 'solo', prefix: '/pxe-outage/', ttl: TTL })
  await outage(t, replica, () => cluster.freeze(0), () => cluster.thaw(0))
})
