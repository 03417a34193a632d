// A leading controller frozen (SIGSTOP) with a state write in flight, woken (SIGCONT) after another replica
// took over: the write is refused by etcd and audited (fenced_write_refused), every request it answers
// gets 503, and nothing of what it tried to write is visible. To hold the write in flight, the frozen
// leader reaches etcd through one member only, which is frozen too until the take-over is done; the new
// leader uses the two other members.
import t from 'tap'
import { performance } from 'node:perf_hooks'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { bundle, checkinBody, makePki, request } from '../e2e/harness.js'
import { needsEtcd, startEtcdCluster } from '../support/etcd-cluster.js'
import { auditOf, Fleet, haSection, spawnReplicaController, startReplicaController } from './ha-fleet.js'
import { until } from './replica.js'

const TTL = 2
const root = mkdtempSync(join(tmpdir(), 'pxe-ha-frozen-'))
t.teardown(() => rmSync(root, { recursive: true, force: true }))

t.test('a frozen leader wakes after a take-over: its write is refused and audited, it answers 503', needsEtcd(), async (t) => {
  const [cluster, pki] = await Promise.all([startEtcdCluster(t, 3), makePki(root)])
  const [fleet, op] = await Promise.all([Fleet.create(pki, 3), bundle(pki, 'ops-alice', 'operator')])
  const prefix = '/pxe-ha-frozen/'
  const lone = [0, 1, 2].find((i) => i !== cluster.raftLeader())! // freezing the raft leader would start an etcd election
  const others = cluster.members.filter((_, i) => i !== lone).map((m) => m.endpoint)
  const frozen = await spawnReplicaController(t, pki, root, 'frozen', haSection(cluster, prefix, TTL, [cluster.members[lone]!.endpoint]))
  await until(async () => (await request(frozen.port, pki.ca, op, '/v1/plan')).status === 200, 30_000, 'the first replica leads')
  const standby = await startReplicaController(t, pki, root, 'standby', haSection(cluster, prefix, TTL, others))
  const ports = [frozen.port, standby.port]
  await fleet.checkInAll(ports)
  const generation = [...(await fleet.checkInAll(ports)).values()][0]!.generation

  await cluster.freeze(lone)
  const drain = request(frozen.port, pki.ca, op, '/v1/nodes/node-2/drain', { body: { draining: true, force: true } }) // its write hangs on the frozen member
  // Frozen only once the drain was decided (audited before its write is sent, which follows at once): on
  // a loaded machine a fixed 100 ms was sometimes too short, the drain then reached a leader that had
  // already lost its term on waking, and no write was ever in flight to be refused.
  await until(() => auditOf(frozen.root).some((e) => e.event === 'drain_set'), 5000, 'the frozen leader took the drain')
  await new Promise((resolve) => setTimeout(resolve, 50))
  frozen.signal('SIGSTOP')
  const frozenAt = performance.now()
  const sentWhileFrozen = request(frozen.port, pki.ca, fleet.nodes[0]!.identity, '/v1/checkin', { body: checkinBody('node-0', { capacity: 8, generation }) })
  await until(() => standby.host.isLeader(), 4 * TTL * 1000, 'the standby takes over')
  t.comment(`the standby leads ${(performance.now() - frozenAt).toFixed(0)} ms after the freeze`)
  await cluster.thaw(lone) // the member answers the frozen leader's transaction now: refused, the election key is gone
  await new Promise((resolve) => setTimeout(resolve, 500))
  frozen.signal('SIGCONT')

  const [drained, checkedIn] = await Promise.all([drain, sentWhileFrozen])
  t.equal(drained.status, 503, `the request whose write was in flight: 503 ${drained.json?.error}`)
  t.equal(checkedIn.status, 503, `a check-in sent while it was frozen: 503 ${checkedIn.json?.error}`)
  await until(() => auditOf(frozen.root).some((e) => e.event === 'fenced_write_refused'), 5000, 'the refusal is audited').catch(() => undefined)
  const audit = auditOf(frozen.root)
  t.match(audit.find((e) => e.event === 'fenced_write_refused'), { controller_id: 'frozen', committed_transactions: 0 }, 'fenced_write_refused audited')
  t.match(audit.find((e) => e.event === 'leader_lost'), { controller_id: 'frozen', reason: 'renew_deadline' }, 'leader_lost audited')
  const after = await request(frozen.port, pki.ca, fleet.nodes[1]!.identity, '/v1/checkin', { body: checkinBody('node-1', { capacity: 8, generation }) })
  t.equal(after.status, 503, 'awake, it still refuses')
  const plan = await request(standby.port, pki.ca, op, '/v1/plan')
  t.equal(plan.json.generation, generation, 'the generation the frozen leader tried to publish is nowhere')
  t.notOk(plan.json.nodes.find((n: { node_id: string }) => n.node_id === 'node-2')?.draining, 'nor the drain')
  t.equal(plan.json.leader, 'standby')
})
