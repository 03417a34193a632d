// A three-member etcd cluster that loses one member (kill -9 of its raft leader, the hardest case: etcd
// itself must elect again) keeps serving: the controller leader keeps its leadership, its fenced writes
// commit again after etcd's own election, and the follower still names it. A member that hangs instead
// (SIGSTOP) past the renew deadline does not cost the leadership either.
import t from 'tap'
import { performance } from 'node:perf_hooks'
import { fencedWrite } from '../../src/ha/fenced-write.js'
import { needsEtcd, startEtcdCluster } from '../support/etcd-cluster.js'
import { leaders, startReplica, until, type Replica } from './replica.js'

// etcd elects a new raft leader within one to two election timeouts (1 s by default); the renew
// deadline (2/3 TTL) must comfortably outlast that plus the client's move to another member, as in
// production (see src/ha/README.md). 10 s, the SPEC's example: with 6 s (a 4 s deadline) one CI run on
// two loaded cores saw the leader step down, which is safe but not what this test is about.
const TTL = 10

interface WriteOutcome {
  readonly at: number
  readonly outcome: 'committed' | 'refused' | 'failed'
}

/** Writes under the leader's fence every 100 ms until stopped; records each outcome. */
function keepWriting(leader: Replica): { outcomes: WriteOutcome[]; stop(): Promise<void> } {
  const outcomes: WriteOutcome[] = []
  let running = true
  const loop = (async () => {
    for (let n = 0; running; n++) {
      const fence = leader.leadership.fence()
      if (!fence) break
      try {
        const res = await fencedWrite(leader.client, fence, [{ type: 'put', key: `/pxe-members/state/${n % 10}`, value: String(n) }])
        outcomes.push({ at: performance.now(), outcome: res.status })
      } catch {
        outcomes.push({ at: performance.now(), outcome: 'failed' })
      }
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  })()
  return {
    outcomes,
    stop: async () => {
      running = false
      await loop
    },
  }
}

t.test('losing one of three etcd members (its raft leader) keeps the controller leader serving', needsEtcd(), async (t) => {
  const cluster = await startEtcdCluster(t, 3)
  const replicas = [await startReplica(t, cluster, { id: 'a', prefix: '/pxe-members/', ttl: TTL }), await startReplica(t, cluster, { id: 'b', prefix: '/pxe-members/', ttl: TTL })]
  await until(() => leaders(replicas).length === 1 && replicas.every((r) => r.leadership.leaderId === leaders(replicas)[0]!.id), 4 * TTL * 1000, 'one leads, both know')
  const leader = leaders(replicas)[0]!
  const follower = replicas.find((r) => r !== leader)!
  const writes = keepWriting(leader)
  await until(() => writes.outcomes.some((w) => w.outcome === 'committed'), 10_000, 'writes commit')

  const victim = cluster.raftLeader()
  const killedAt = performance.now()
  await cluster.kill(victim)
  const tally = () => {
    const after = writes.outcomes.filter((w) => w.at > killedAt)
    const count = (o: WriteOutcome['outcome']) => after.filter((w) => w.outcome === o).length
    return `committed ${count('committed')}, failed ${count('failed')}, refused ${count('refused')} since the kill; controller leader leads: ${leader.leadership.isLeader}, stopped: ${JSON.stringify(leader.of('stopped'))}`
  }
  try {
    await until(() => writes.outcomes.filter((w) => w.at > killedAt && w.outcome === 'committed').length >= 10, 40_000, 'ten writes commit after the kill')
  } catch (err) {
    throw new Error(`${(err as Error).message} (${tally()})`)
  }
  await writes.stop()

  t.ok(leader.leadership.isLeader, 'the controller leader still leads')
  t.same(leader.of('stopped'), [], 'it never stepped down')
  t.equal(writes.outcomes.filter((w) => w.outcome === 'refused').length, 0, 'no fenced write was refused')
  t.equal(follower.leadership.leaderId, leader.id, 'the follower still names the leader')
  t.notOk(follower.leadership.isLeader, 'and does not lead')
  const after = writes.outcomes.filter((w) => w.at > killedAt)
  const firstCommit = after.find((w) => w.outcome === 'committed')!
  t.comment(
    `killed etcd member m${victim} (raft leader): ${after.filter((w) => w.outcome === 'failed').length} writes failed, ` +
      `first commit ${(firstCommit.at - killedAt).toFixed(0)} ms after the kill`,
  )
  // the lost member comes back and catches up; nothing changes for the controllers
  await cluster.restart(victim)
  const fence = leader.leadership.fence()!
  t.equal((await fencedWrite(leader.client, fence, [{ type: 'put', key: '/pxe-members/state/back', value: 'x' }])).status, 'committed', 'writes commit with the member back')

  // a member that hangs (frozen: calls to it time out instead of failing) for longer than the renew
  // deadline costs a client one timed-out call, then is skipped; the leadership holds
  const hung = [0, 1, 2].find((i) => i !== cluster.raftLeader())!
  const again = keepWriting(leader)
  const frozenAt = performance.now()
  await cluster.freeze(hung)
  const deadline = (TTL * 1000 * 2) / 3
  const sinceFreeze = () => {
    const after = again.outcomes.filter((w) => w.at > frozenAt)
    const count = (o: WriteOutcome['outcome']) => after.filter((w) => w.outcome === o).length
    return `committed ${count('committed')}, failed ${count('failed')}, refused ${count('refused')} since the freeze of m${hung}; leads: ${leader.leadership.isLeader}, stopped: ${JSON.stringify(leader.of('stopped'))}, errors: ${leader.errors.slice(-3).map((e) => e.message).join(' | ')}`
  }
  try {
    // (30 s: in one CI run on a loaded machine 20 s were not enough; the message then says what happened)
    await until(
      () => performance.now() - frozenAt > deadline + 500 && again.outcomes.filter((w) => w.at > frozenAt && w.outcome === 'committed').length >= 5,
      30_000,
      'writes commit while the member hangs, past the renew deadline',
    )
  } catch (err) {
    throw new Error(`${(err as Error).message} (${sinceFreeze()})`)
  }
  await cluster.thaw(hung)
  await again.stop()
  t.same(leader.of('stopped'), [], `etcd member m${hung} hung past the renew deadline: the leader did not step down`)
  t.ok(leader.leadership.isLeader, 'and still leads')
})
