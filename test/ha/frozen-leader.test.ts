// A leader frozen (SIGSTOP) past its TTL while a standby takes over, then woken (SIGCONT): it learns that
// it no longer leads before it writes again, its write under the old fence is refused by etcd, and none
// of its writes lands after the new leader's first one.
import t from 'tap'
import { performance } from 'node:perf_hooks'
import { fencedWrite } from '../../src/ha/fenced-write.js'
import { readPrefix } from '../../src/ha/paged-read.js'
import { needsEtcd, startEtcdCluster } from '../support/etcd-cluster.js'
import { spawnCandidate, type ChildEvent } from './candidate.js'
import { startReplica, until } from './replica.js'

const TTL = 2
const START_TIMEOUT = 30_000

t.test('a frozen leader that wakes after a take-over stops leading before it writes', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 1)
  const prefix = '/pxe-frozen/'
  const frozen = spawnCandidate(t, cluster, { id: 'frozen', prefix, ttl: TTL })
  await frozen.waitFor((e) => e.event === 'started', START_TIMEOUT, 'leadership')
  const standby = await startReplica(t, cluster, { id: 'standby', prefix, ttl: TTL })
  await until(() => standby.leadership.leaderId === 'frozen', START_TIMEOUT, 'the standby names the frozen leader')
  await frozen.waitFor((e) => e.event === 'write' && e.status === 'committed', START_TIMEOUT, 'a write as leader')

  const frozenAt = performance.now()
  frozen.signal('SIGSTOP')
  await until(() => standby.leadership.isLeader, 4 * TTL * 1000, 'the standby takes over')
  const took = performance.now() - frozenAt
  t.ok(took < 2 * TTL * 1000, `the standby took over ${took.toFixed(0)} ms after the freeze (bound: 2 x TTL)`)
  const first = await fencedWrite(standby.client, standby.leadership.fence()!, [{ type: 'put', key: `${prefix}writes/standby/1`, value: 'standby' }])
  t.equal(first.status, 'committed', 'the new leader writes')

  const wokeAt = performance.now()
  frozen.signal('SIGCONT')
  const stale = await frozen.waitFor((e) => e.event === 'stale_write', 10_000, 'its write under the old fence')
  t.equal(stale.status, 'refused', 'etcd refuses the woken leader its write under the old fence')
  const stopped = frozen.events.find((e) => e.event === 'stopped' && e.receivedAt > wokeAt)
  t.equal(stopped?.reason, 'renew_deadline', 'on waking it found its renew deadline passed and stopped leading')
  const sentLater = frozen.events.filter((e: ChildEvent) => e.event === 'write' && e.status === 'committed' && (e.sentAt as number) > stopped!.at)
  t.same(sentLater, [], 'no write was sent (let alone committed) after it stopped leading')

  const client = await cluster.client(t)
  const itsWrites = (await readPrefix(client, `${prefix}writes/frozen/`)).entries
  t.ok(itsWrites.length > 0, 'the frozen leader had written before the freeze')
  t.ok(
    itsWrites.every((kv) => BigInt(kv.modRevision) < BigInt(first.revision)),
    'every write of the old leader precedes the new leader’s first write',
  )
  t.notOk(itsWrites.some((kv) => kv.key.endsWith('/stale')), 'the stale write left nothing')
  await frozen.waitFor((e) => e.event === 'leader' && e.id === 'standby' && e.receivedAt > wokeAt, 4 * TTL * 1000, 'the new leader named')
  t.ok(standby.leadership.isLeader, 'the new leader still leads')
  t.equal(standby.of('stopped').length, 0, 'and never stepped down')
})
