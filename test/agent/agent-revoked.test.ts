// A refused certificate, over real mTLS: revoked with the operator toolkit while the agent runs (the
// controller closes its connection and refuses every new handshake), and a 401 answer.
import t from 'tap'
import { join } from 'node:path'
import { revoke } from '../../pki/revocation.js'
import { bundle, makePki, request } from '../e2e/harness.js'
import { Recorder, controllerIn, fakeController, nodeIdentities, recordingAgent, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const settings = { total_shards: 8, max_concurrency: 8, lease_seconds: 30, identify_interval_ms: 5000 }
const root = testDir(t)
const pki = await makePki(root)
const [idA, idB, idC] = await nodeIdentities(pki, ['node-a', 'node-b', 'node-c'])
const op = await bundle(pki, 'ops', 'operator')

t.test('pxe-pki revoke: the agent stops every shard at once and says why; other nodes go on', async (t) => {
  const ctl = await controllerIn(pki, join(root, 'c0'), settings)
  t.teardown(() => ctl.running.stop())
  const rec = new Recorder()
  // A 30 s lease: the shards can only stop this soon because the refusal was recognised.
  const a = recordingAgent(rec, idA, [urlOf(ctl.port)])
  const b = recordingAgent(rec, idB, [urlOf(ctl.port)])
  t.teardown(() => Promise.all([a.stop(), b.stop()]))
  await a.start()
  await until('node-a runs its shards', () => rec.running('node-a').length === 4)
  await b.start()
  await until('node-b runs its shards', () => rec.running('node-b').length === 4)
  const revokedAt = performance.now()
  await revoke(pki.dir, { name: 'node-a' })
  // Once the controller has loaded the CRL (node-a leaves its plan), check in: the next regular
  // check-in is 10 s away.
  let gone = false
  while (!gone) {
    const plan = await request(ctl.port, pki.ca, op, '/v1/plan')
    gone = !plan.json.nodes.some((n: { node_id: string }) => n.node_id === 'node-a')
    await new Promise((r) => setTimeout(r, 50))
  }
  a.checkInNow()
  await until('node-a stopped every shard', () => rec.running('node-a').length === 0)
  const stops = rec.shardEvents.filter((e) => e.node === 'node-a' && e.kind === 'stop')
  t.ok(stops.every((e) => e.reason === 'certificate_refused'), 'stopped because the certificate was refused')
  t.ok(Math.max(...stops.map((e) => e.at)) - revokedAt < 15_000, 'long before the 30 s lease would have ended')
  const refusal = rec.events('node-a', 'certificate_refused')[0]?.event
  t.ok(refusal, 'the agent said why')
  t.match(refusal?.detail ?? '', /revoked/, 'naming a probable revocation')
  t.same(rec.events('node-a', 'authority_lost').map((e) => e.event.reason), ['certificate_refused'])
  t.equal(a.status().state, 'no_authority')
  // node-a is removed from the plan at once, so node-b may be given other shards; it is not refused.
  b.checkInNow()
  await until('node-b renews after the revocation', () => rec.events('node-b', 'plan_accepted').some((e) => e.at > revokedAt))
  t.equal(rec.events('node-b', 'certificate_refused').length, 0, 'node-b is not refused')
  t.equal(b.status().state, 'active')
})

t.test('a 401 answer is a definitive refusal: the agent stops every shard and halts', async (t) => {
  const ctl = await controllerIn(pki, join(root, 'c1'), settings)
  t.teardown(() => ctl.running.stop())
  const fake = await fakeController(pki, () => ({ status: 401, body: { error: 'unauthenticated', message: 'a valid client certificate issued by this controller is required' } }))
  t.teardown(() => fake.close())
  const rec = new Recorder()
  // The stand-in is the second URL: reached once the real controller is gone.
  const c = recordingAgent(rec, idC, [urlOf(ctl.port), urlOf(fake.port)])
  await c.start()
  await until('node-c runs its shards', () => rec.running('node-c').length === 4)
  await ctl.running.stop()
  c.checkInNow()
  const end = await c.closed
  t.equal(end.reason, 'certificate_refused')
  t.match(end.detail, /401 unauthenticated/)
  t.same(rec.running('node-c'), [], 'every shard stopped')
  t.ok(rec.shardEvents.filter((e) => e.kind === 'stop').every((e) => e.reason === 'certificate_refused'))
  t.equal(c.status().state, 'halted')
  t.equal(rec.events('node-c', 'halted').length, 1)
  const seen = fake.seen.length
  await new Promise((r) => setTimeout(r, 300))
  t.equal(fake.seen.length, seen, 'a halted agent sends nothing more')
})
