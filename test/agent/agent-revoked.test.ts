// A refused certificate, over real mTLS. Definitive only when every controller URL refuses it, on new
// connections, twice in a row: then every shard stops at once and the agent halts. A refusal by some
// controllers only (a replica configured with another CA during a rollout, a stand-in answering 401 while
// the real controller is away) is probable: logged at warn, retried, and the shards stop at the fail-safe
// as for any controller that cannot be reached.
// Refusals: a Node controller with the CRL closes the connection right after the TLS handshake (revoked
// with the operator toolkit while the agent is connected: the controller also closes its open
// connection); `openssl s_server` sends the TLS alert naming the reason; a stand-in answers 401.
import t from 'tap'
import { Writable } from 'node:stream'
import { join } from 'node:path'
import { pino } from 'pino'
import { revoke } from '../../pki/revocation.js'
import type { AgentEnd } from '../../src/agent/agent-status.js'
import { bundle, makePki, request, type Pki } from '../e2e/harness.js'
import { opensslRefuser } from './openssl-refuser.js'
import { Recorder, controllerIn, fakeController, nodeIdentities, recordingAgent, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const settings = { total_shards: 8, max_concurrency: 8, lease_seconds: 30, identify_interval_ms: 5000 }
const root = testDir(t)
const pki = await makePki(root)
const stranger = await makePki(join(root, 'stranger'))
const [idA, idB, idC, idD, idE, idF] = await nodeIdentities(pki, ['node-a', 'node-b', 'node-c', 'node-d', 'node-e', 'node-f'])
const op = await bundle(pki, 'ops', 'operator')

/** A pino logger into an array of parsed lines, to check the level each event is logged at. */
function capturedLog() {
  const lines: { level: number; event?: string; definitive?: boolean; msg: string }[] = []
  const stream = new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(JSON.parse(chunk.toString())), done()) })
  return { logger: pino({ level: 'debug' }, stream), lines }
}

/** The agent's end, or a rejection after `ms` (an agent that never gives up must fail the test, not hang it). */
function endWithin(closed: Promise<AgentEnd>, ms: number): Promise<AgentEnd> {
  return Promise.race([closed, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`the agent did not halt within ${ms} ms`)), ms).unref())])
}

/** Waits until the controller has loaded the CRL that revokes `node` (it leaves the plan at once). */
async function untilRemoved(pkiOf: Pki, port: number, node: string): Promise<void> {
  for (;;) {
    const plan = await request(port, pkiOf.ca, op, '/v1/plan')
    if (!plan.json.nodes.some((n: { node_id: string }) => n.node_id === node)) return
    await new Promise((r) => setTimeout(r, 50))
  }
}

t.test('pxe-pki revoke while connected: the next check-in is refused on new connections twice, every shard stops at once, the agent halts; other nodes go on', async (t) => {
  const ctl = await controllerIn(pki, join(root, 'c0'), settings)
  t.teardown(() => ctl.running.stop())
  const rec = new Recorder()
  const log = capturedLog()
  // A 30 s lease: the shards can only stop this soon because the refusal was recognised.
  const a = recordingAgent(rec, idA, [urlOf(ctl.port)], { logger: log.logger })
  const b = recordingAgent(rec, idB, [urlOf(ctl.port)])
  t.teardown(() => Promise.all([a.stop(), b.stop()]))
  await a.start()
  await until('node-a runs its shards', () => rec.running('node-a').length === 4)
  await b.start()
  await until('node-b runs its shards', () => rec.running('node-b').length === 4)
  const revokedAt = performance.now()
  await revoke(pki.dir, { name: 'node-a' })
  // Once the controller has loaded the CRL (node-a leaves its plan; its open connection is closed), check
  // in: the next regular check-in is 10 s away.
  await untilRemoved(pki, ctl.port, 'node-a')
  a.checkInNow()
  const end = await endWithin(a.closed, 10_000)
  t.equal(end.reason, 'certificate_refused')
  t.match(end.detail, new RegExp(`every controller refused this node's certificate.*${urlOf(ctl.port)} closed the connection right after the TLS handshake`), end.detail)
  t.same(rec.running('node-a'), [], 'every shard stopped')
  const stops = rec.shardEvents.filter((e) => e.node === 'node-a' && e.kind === 'stop')
  t.equal(stops.length, 4)
  t.ok(stops.every((e) => e.reason === 'certificate_refused'), 'stopped because the certificate was refused')
  t.ok(Math.max(...stops.map((e) => e.at)) - revokedAt < 15_000, 'long before the 30 s lease would have ended')
  // classified on the very next attempt: no probable refusal first, no failed check-in
  const after = rec.agentEvents.filter((e) => e.node === 'node-a' && e.at > revokedAt).map((e) => e.event.type)
  t.same(after.filter((type) => type === 'certificate_refused' || type === 'checkin_failed' || type === 'halted'), ['certificate_refused', 'halted'])
  t.same(rec.events('node-a', 'certificate_refused').map((e) => e.event.definitive), [true], 'one refusal, definitive')
  t.same(rec.events('node-a', 'authority_lost').map((e) => e.event.reason), ['certificate_refused'])
  t.equal(a.status().state, 'halted')
  t.same(a.status().halted, end)
  const refusedLine = log.lines.find((l) => l.event === 'certificate_refused')
  t.equal(refusedLine?.level, 50, 'a definitive refusal is logged at error')
  t.ok(log.lines.some((l) => l.event === 'halted' && l.level === 50), 'and so is the halt')
  // node-a is removed from the plan at once, so node-b may be given other shards; it is not refused.
  b.checkInNow()
  await until('node-b renews after the revocation', () => rec.events('node-b', 'plan_accepted').some((e) => e.at > revokedAt))
  t.equal(rec.events('node-b', 'certificate_refused').length, 0, 'node-b is not refused')
  t.equal(b.status().state, 'active')
})

t.test("one controller's TLS alert is not the last word: a replica with another CA is passed over for one that serves", async (t) => {
  // s_server verifying clients against another CA: the alert "unknown ca" on every handshake.
  const replica = await opensslRefuser(pki, { clientCaFile: stranger.dir + '/ca.pem' })
  t.teardown(() => replica.close())
  const ctl = await controllerIn(pki, join(root, 'c1'), settings)
  t.teardown(() => ctl.running.stop())
  const rec = new Recorder()
  // The refusing replica is first: the agent tries it at every start and after every failover.
  const c = recordingAgent(rec, idC, [urlOf(replica.port), urlOf(ctl.port)])
  t.teardown(() => c.stop())
  await c.start()
  await until('node-c runs its shards', () => rec.running('node-c').length === 4)
  t.equal(c.status().state, 'active')
  t.equal(c.status().controller, urlOf(ctl.port), 'served by the controller that accepts the certificate')
  t.same(rec.events('node-c', 'certificate_refused'), [], 'no refusal: another controller answered')
  t.same(rec.events('node-c', 'halted'), [])
})

t.test('a 401 from one controller while the other cannot be reached is probable: warned, retried, and the shards stop at the fail-safe', async (t) => {
  const lease = { ...settings, lease_seconds: 6 }
  const ctl = await controllerIn(pki, join(root, 'c2'), lease)
  t.teardown(() => ctl.running.stop())
  const fake = await fakeController(pki, () => ({ status: 401, body: { error: 'unauthenticated', message: 'a valid client certificate issued by this controller is required' } }))
  t.teardown(() => fake.close())
  const rec = new Recorder()
  const log = capturedLog()
  // The stand-in is the second URL: reached once the real controller is gone.
  const d = recordingAgent(rec, idD, [urlOf(ctl.port), urlOf(fake.port)], { logger: log.logger })
  t.teardown(() => d.stop())
  await d.start()
  await until('node-d runs its shards', () => rec.running('node-d').length === 4)
  await ctl.running.stop()
  d.checkInNow()
  await until('a refusal was reported', () => rec.events('node-d', 'certificate_refused').length > 0)
  const firstRefusal = rec.events('node-d', 'certificate_refused')[0]!
  t.equal(firstRefusal.event.definitive, false, 'one controller of two: probable')
  t.match(firstRefusal.event.detail, new RegExp(`${urlOf(fake.port)}.*401 unauthenticated`))
  t.equal(rec.running('node-d').length, 4, 'the shards still run: a probable refusal does not stop them')
  await until('the fail-safe stopped every shard', () => rec.running('node-d').length === 0)
  const stops = rec.shardEvents.filter((e) => e.node === 'node-d' && e.kind === 'stop')
  t.ok(stops.every((e) => e.reason === 'lease_expiring'), 'stopped by the fail-safe')
  t.same(rec.events('node-d', 'authority_lost').map((e) => e.event.reason), ['lease_expiring'])
  t.ok(rec.events('node-d', 'certificate_refused').every((e) => !e.event.definitive), 'never definitive')
  const levels = log.lines.filter((l) => l.event === 'certificate_refused').map((l) => l.level)
  t.ok(levels.length > 0 && levels.every((level) => level === 40), `logged at warn (levels ${levels.join(', ')})`)
  // not halted: it keeps trying, so that the real controller's return would be noticed
  const seen = fake.seen.length
  await until('the agent tries again', () => fake.seen.length > seen, 10_000)
  t.equal(d.status().state, 'no_authority')
  t.equal(d.status().halted, null)
  t.same(rec.events('node-d', 'halted'), [])
})

t.test('every controller refuses (the TLS alert "certificate revoked", and a Node controller closing the connection): every shard stops at once, the agent halts', async (t) => {
  const ctl = await controllerIn(pki, join(root, 'c3'), settings)
  t.teardown(() => ctl.running.stop())
  let replica = await opensslRefuser(pki)
  t.teardown(() => replica.close())
  const rec = new Recorder()
  const e = recordingAgent(rec, idE, [urlOf(ctl.port), urlOf(replica.port)])
  t.teardown(() => e.stop())
  await e.start()
  await until('node-e runs its shards', () => rec.running('node-e').length === 4)
  // s_server reads the CRL at its start: again, on the same port, with node-e revoked (stopped first, so
  // that a regular check-in meanwhile finds it unreachable, not serving)
  await replica.close()
  const revokedAt = performance.now()
  await revoke(pki.dir, { name: 'node-e' })
  replica = await opensslRefuser(pki, { port: replica.port })
  await untilRemoved(pki, ctl.port, 'node-e')
  e.checkInNow()
  const end = await endWithin(e.closed, 10_000)
  t.equal(end.reason, 'certificate_refused')
  t.match(end.detail, `${urlOf(ctl.port)} closed the connection right after the TLS handshake`)
  t.match(end.detail, `${urlOf(replica.port)} TLS alert certificate revoked`)
  t.same(rec.running('node-e'), [], 'every shard stopped')
  const stops = rec.shardEvents.filter((s) => s.node === 'node-e' && s.kind === 'stop')
  t.ok(stops.length === 4 && stops.every((s) => s.reason === 'certificate_refused'), 'for the refused certificate')
  t.ok(Math.max(...stops.map((s) => s.at)) - revokedAt < 15_000, 'long before the 30 s lease would have ended')
  // (a regular check-in while s_server restarted may have found a probable refusal first)
  const refusals = rec.events('node-e', 'certificate_refused').map((r) => r.event.definitive)
  t.same(refusals.filter((definitive) => definitive), [true], 'one definitive refusal')
  t.equal(refusals.at(-1), true, 'the last')
  t.equal(e.status().state, 'halted')
  t.equal(rec.events('node-e', 'halted').length, 1)
})

t.test('a 401 from every controller, twice on new connections: the agent halts and sends nothing more', async (t) => {
  const refuse = () => ({ status: 401, body: { error: 'unauthenticated', message: 'a valid client certificate issued by this controller is required' } })
  const one = await fakeController(pki, refuse)
  t.teardown(() => one.close())
  const two = await fakeController(pki, refuse)
  t.teardown(() => two.close())
  const rec = new Recorder()
  const f = recordingAgent(rec, idF, [urlOf(one.port), urlOf(two.port)])
  await f.start()
  const end = await endWithin(f.closed, 10_000)
  t.equal(end.reason, 'certificate_refused')
  t.match(end.detail, `${urlOf(one.port)} 401 unauthenticated`)
  t.match(end.detail, `${urlOf(two.port)} 401 unauthenticated`)
  t.same([one.seen.length, two.seen.length], [2, 2], 'each controller asked twice')
  t.same([one.connections(), two.connections()], [2, 2], 'each time on a new connection')
  t.equal(f.status().state, 'halted')
  t.same(rec.events('node-f', 'certificate_refused').map((e) => e.event.definitive), [true])
  await new Promise((r) => setTimeout(r, 300))
  t.same([one.seen.length, two.seen.length], [2, 2], 'a halted agent sends nothing more')
})
