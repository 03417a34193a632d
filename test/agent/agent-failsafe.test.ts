// The fail-safe and refused plans, against real controllers over mTLS: a controller that goes away,
// a controller that serves an older generation (a rolled-back state), and one that signs with a key
// the node does not pin. In every case the last accepted plan stays in force until its lease ends,
// and every shard is stopped before that moment.
import t, { type Test } from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { newPlanKey } from '../../pki/plan-keys.js'
import { parsePlanKeys } from '../../src/signing/plan-keys.js'
import { PlanSigner } from '../../src/signing/plan-signer.js'
import { checkinBody, makePki, request } from '../e2e/harness.js'
import { Recorder, controllerIn, fakeController, nodeIdentities, recordingAgent, until, urlOf } from './support.js'
import type { NodeAgent } from '../../src/agent/node-agent.js'
import { testDir } from '../support/test-dir.js'

const LEASE_MS = 6000
const settings = { total_shards: 8, max_concurrency: 8, lease_seconds: LEASE_MS / 1000, identify_interval_ms: 5000 }
const root = testDir(t)
const pki = await makePki(root)
const [idA, idB, idC] = await nodeIdentities(pki, ['node-a', 'node-b', 'node-c'])

/** Asserts that every stop of `node` came, for reason lease_expiring, before its authority ended. */
function assertStoppedInTime(t: Test, rec: Recorder, agent: NodeAgent, node: string, renewalSentAt: number): void {
  const stops = rec.shardEvents.filter((e) => e.node === node && e.kind === 'stop')
  t.ok(stops.length > 0 && stops.every((e) => e.reason === 'lease_expiring'), 'stopped because the lease was running out')
  const authorityEnd = renewalSentAt + LEASE_MS
  const latest = Math.max(...stops.map((e) => e.wall))
  t.comment(`${node}: last stop ${authorityEnd - latest} ms before its authority ended`)
  t.ok(latest < authorityEnd, 'every shard stopped before lease_seconds after the last renewal was sent')
  t.equal(agent.status().state, 'no_authority')
  t.same(rec.events(node, 'authority_lost').map((e) => e.event.reason), ['lease_expiring'], 'and said why')
}

t.test('a controller that becomes unreachable: every shard stops before the authority ends', async (t) => {
  const ctl = await controllerIn(pki, join(root, 'c0'), settings)
  const rec = new Recorder()
  const agent = recordingAgent(rec, idC, [urlOf(ctl.port)])
  t.teardown(() => agent.stop())
  await agent.start()
  await until('node-c runs its shards', () => rec.running('node-c').length === 4)
  await ctl.running.stop()
  const sentAt = agent.status().lastRenewalSentAt!
  await until('node-c stopped every shard', () => rec.running('node-c').length === 0)
  t.ok(rec.events('node-c', 'checkin_failed').length > 0, 'check-ins failed meanwhile')
  assertStoppedInTime(t, rec, agent, 'node-c', Math.max(sentAt, agent.status().lastRenewalSentAt!))
})

t.test('a replayed plan and a forged plan are refused; the last accepted plan stays until its lease ends', async (t) => {
  const c1 = await controllerIn(pki, join(root, 'c1'), settings)
  t.teardown(() => c1.running.stop())
  // A generation-1 answer for node-a, captured at its join and replayed once node-a is at generation 2.
  const captured = await request(c1.port, pki.ca, idA, '/v1/checkin', { body: checkinBody('node-a', { capacity: 4 }) })
  t.equal(captured.json.generation, 1)
  // A forged answer for node-b: every shard, a higher generation, signed with the attacker's own key
  // under the pinned kid.
  const attacker = await newPlanKey()
  const forger = new PlanSigner({ ...(await parsePlanKeys({ current: attacker.kid, keys: [attacker] }, 'attacker')), kid: idB.pinnedKeys.kids[0]! })
  const plain = { generation: 9, total_shards: 8, assigned: [0, 1, 2, 3, 4, 5, 6, 7], range_start: 0, range_count: 8, lease_seconds: 6, max_concurrency: 8 }
  const iat = Math.floor(Date.now() / 1000)
  const forged = { ...plain, plan_jws: forger.signPayload(JSON.stringify({ iss: 'test-controller', sub: 'node-b', iat, exp: iat + 6, ...plain })) }
  const fake = await fakeController(pki, (cn) => ({ status: 200, body: cn === 'node-a' ? captured.json : forged }))
  t.teardown(() => fake.close())

  const rec = new Recorder()
  // A short stop timeout: the refusals must come while the last accepted plan is still in force.
  const a = recordingAgent(rec, idA, [urlOf(c1.port), urlOf(fake.port)], { stopTimeoutMs: 500 })
  const b = recordingAgent(rec, idB, [urlOf(c1.port), urlOf(fake.port)], { stopTimeoutMs: 500 })
  t.teardown(() => Promise.all([a.stop(), b.stop()]))
  await a.start()
  await until('node-a runs its shards', () => rec.running('node-a').length === 4)
  await b.start()
  await until('node-b runs its shards', () => rec.running('node-b').length === 4)
  await until('node-a accepted generation 2', () => a.status().acceptedGeneration === 2)

  await c1.running.stop()
  await until('both refused a plan', () => rec.events('node-a', 'plan_refused').length > 0 && rec.events('node-b', 'plan_refused').length > 0)
  const refusedA = rec.events('node-a', 'plan_refused')[0]!.event
  const refusedB = rec.events('node-b', 'plan_refused')[0]!.event
  t.equal(refusedA.reason, 'generation_rollback', `node-a: ${refusedA.detail}`)
  t.equal(refusedB.reason, 'bad_signature', `node-b: ${refusedB.detail}`)
  t.equal(refusedA.controller, urlOf(fake.port), 'both from the stand-in controller')
  t.same(rec.running('node-a'), [0, 1, 2, 3], 'node-a still runs under the last accepted plan')
  t.same(rec.running('node-b'), [4, 5, 6, 7], 'node-b still runs under the last accepted plan, not the forged one')
  t.equal(a.status().acceptedGeneration, 2, 'the accepted generation did not move')
  t.equal(b.status().acceptedGeneration, 2)
  const sentA = a.status().lastRenewalSentAt!
  const sentB = b.status().lastRenewalSentAt!
  await until('both stopped every shard', () => rec.running('node-a').length === 0 && rec.running('node-b').length === 0)
  assertStoppedInTime(t, rec, a, 'node-a', sentA)
  assertStoppedInTime(t, rec, b, 'node-b', sentB)
  t.notOk(rec.shardEvents.some((e) => e.node === 'node-b' && e.kind === 'start' && e.shard < 4), 'no shard of the forged plan was started')
})
