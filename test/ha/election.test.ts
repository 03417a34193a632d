// Leader election on a real etcd: exactly one leader among two and three replicas, every replica knows
// the leader's controller_id, leadership never overlaps, and a resigning leader hands over at once.
import t from 'tap'
import { fencedWrite } from '../../src/ha/fenced-write.js'
import { needsEtcd, startEtcdCluster } from '../support/etcd-cluster.js'
import { leaders, startReplica, until, type Replica } from './replica.js'

const TTL = 2

/** Leadership intervals of all replicas, from their own events: no two may overlap. */
function overlaps(replicas: readonly Replica[]): string[] {
  const spans = replicas.flatMap((r) => {
    const starts = r.of('started')
    const stops = r.of('stopped')
    return starts.map((s, i) => ({ id: r.id, from: s.at, to: stops[i]?.at ?? Infinity }))
  })
  const found: string[] = []
  for (const a of spans) for (const b of spans) if (a !== b && a.from < b.from && b.from < a.to) found.push(`${b.id} started while ${a.id} led`)
  return found
}

async function oneLeaderKnownByAll(replicas: readonly Replica[]): Promise<Replica> {
  await until(
    () => {
      const now = leaders(replicas)
      return now.length === 1 && replicas.every((r) => r.leadership.leaderId === now[0]!.id)
    },
    4 * TTL * 1000,
    'one replica leads and all know it',
  )
  return leaders(replicas)[0]!
}

t.test('two and three replicas elect exactly one leader, known to all', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  for (const count of [2, 3]) {
    const prefix = `/pxe-election-${count}/`
    const replicas = await Promise.all(Array.from({ length: count }, (_, i) => startReplica(t, cluster, { id: `controller-${i}`, prefix, ttl: TTL })))
    const leader = await oneLeaderKnownByAll(replicas)
    t.equal(leaders(replicas).length, 1, `${count} replicas: exactly one leads`)
    for (const r of replicas) {
      t.equal(r.leadership.leaderId, leader.id, `${count} replicas: ${r.id} names the leader`)
      t.equal(r.of('leader').at(-1)?.id, leader.id, `${count} replicas: ${r.id} was told through onNewLeader`)
      if (r !== leader) t.equal(r.leadership.fence(), null, `${count} replicas: follower ${r.id} holds no fence`)
    }
    const fence = leader.leadership.fence()!
    t.equal(fence.controllerId, leader.id)
    t.match(fence.key, new RegExp(`^${prefix}election/[0-9a-f]+$`), 'the election key lives under <prefix>election/')
    const write = await fencedWrite(leader.client, fence, [{ type: 'put', key: `${prefix}state/x`, value: 'by the leader' }])
    t.equal(write.status, 'committed', 'the leader writes under its fence')
    t.same(overlaps(replicas), [], 'no two replicas led at the same time')
  }
})

t.test('a resigning leader hands over at once; the old fence is refused', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const prefix = '/pxe-resign/'
  const replicas = await Promise.all(['a', 'b', 'c'].map((id) => startReplica(t, cluster, { id, prefix, ttl: TTL })))
  const first = await oneLeaderKnownByAll(replicas)
  const oldFence = first.leadership.fence()!
  await first.leadership.close()
  t.equal(first.of('stopped').at(-1)?.reason, 'closed', 'the leader stopped leading when it closed')
  t.notOk(first.leadership.isLeader)
  const rest = replicas.filter((r) => r !== first)
  // close() revoked the lease: the next replica leads without waiting for a TTL
  const second = await oneLeaderKnownByAll(rest)
  t.not(second.id, first.id, 'another replica took over')
  const stale = await fencedWrite(second.client, oldFence, [{ type: 'put', key: `${prefix}state/x`, value: 'stale' }])
  t.equal(stale.status, 'refused', 'a write under the old leader fence is refused by etcd')
  const fresh = await fencedWrite(second.client, second.leadership.fence()!, [{ type: 'put', key: `${prefix}state/x`, value: 'new' }])
  t.equal(fresh.status, 'committed')
  t.same(overlaps(replicas), [], 'no two replicas led at the same time')
})
