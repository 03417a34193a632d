// The agent and its REST proxy against a stand-in controller (real mTLS, plans signed with the PKI's
// plan key) and a stand-in Discord API: the verified plan's share reaches the proxy and check-ins carry
// rest_demand; a controller without "rest" gives no share (said once); the share ends at `until`, when
// authority is lost, at leave() and at stopNow(); a plan whose rest is malformed or disagrees with the
// plain answer is refused and changes nothing.
import t, { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parsePlanKeys } from '../../src/signing/plan-keys.js'
import { PlanSigner } from '../../src/signing/plan-signer.js'
import { startRestProxy, type RestProxy } from '../../src/rest/index.js'
import type { NodeAgent } from '../../src/agent/node-agent.js'
import { makePki } from '../e2e/harness.js'
import { Recorder, fakeController, nodeIdentities, recordingAgent, until, urlOf, type FakeController } from './support.js'
import { testDir } from '../support/test-dir.js'
import { call, capturingLogger, startUpstream, type Upstream } from '../rest/upstream.js'

const root = testDir(t)
const pki = await makePki(root)
const [idA] = await nodeIdentities(pki, ['node-a'])
const signer = new PlanSigner(await parsePlanKeys(JSON.parse(readFileSync(join(pki.dir, 'plan-keys.json'), 'utf8')), 'plan-keys.json'))
const LEASE = 6
const AUTH = 'Bot agent-test-token'

type Rest = { per_second: unknown; invalid_budget: unknown; until: unknown } | undefined
/** What the stand-in puts in its answers: the signed rest, and the plain one (the same unless told). */
interface RestPlan {
  signed: () => Rest
  plain?: () => Rest
}

/** A stand-in answering check-ins with a signed plan (no shards) carrying `plan`'s rest, and recording the bodies. */
async function standIn(t: Test, plan: RestPlan): Promise<FakeController> {
  const fake = await fakeController(pki, (_cn, path) => {
    if (path !== '/v1/checkin') return { status: 404, body: { error: 'not_found', message: 'no' } }
    const iat = Math.floor(Date.now() / 1000)
    const common = { generation: 1, total_shards: 4, assigned: [], range_start: 0, range_count: 0, lease_seconds: LEASE, max_concurrency: 1 }
    const signed = plan.signed()
    const plain = plan.plain === undefined ? signed : plan.plain()
    const payload = { iss: 'stand-in', sub: 'node-a', iat, exp: iat + LEASE, ...common, ...(signed === undefined ? {} : { rest: signed }) }
    return { status: 200, body: { ...common, ...(plain === undefined ? {} : { rest: plain }), plan_jws: signer.signPayload(JSON.stringify(payload)) } }
  })
  t.teardown(() => fake.close())
  return fake
}

async function withProxy(t: Test, opts: { maxHoldMs?: number } = {}): Promise<{ proxy: RestProxy; up: Upstream; logs: string[] }> {
  const up = await startUpstream()
  const logs: string[] = []
  const proxy = await startRestProxy({ upstream: up.api, logger: capturingLogger(logs), ...opts })
  t.teardown(async () => {
    await proxy.close()
    await up.close()
  })
  return { proxy, up, logs }
}

function agentWith(t: Test, fake: FakeController, proxy: RestProxy, logs: string[] = []): NodeAgent {
  const agent = recordingAgent(new Recorder(), idA, [urlOf(fake.port)], { restProxy: proxy, logger: capturingLogger(logs) })
  t.teardown(() => agent.stop())
  return agent
}

const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString()
const checkins = (fake: FakeController) => fake.bodies as { rest_demand?: unknown }[]

t.test("the verified plan's share reaches the proxy; every check-in carries rest_demand", async (t) => {
  const fake = await standIn(t, { signed: () => ({ per_second: 7.5, invalid_budget: 300, until: inSeconds(LEASE) }) })
  const { proxy, up } = await withProxy(t)
  const agent = agentWith(t, fake, proxy)
  await agent.start()
  await until('the share is in force', () => proxy.share() !== null)
  t.match(proxy.share(), { perSecond: 7.5, invalidBudget: 300 })
  t.match(await agent.metrics.metrics(), /pxe_rest_share_per_second 7\.5/, "the proxy's metrics are on the agent's registry")
  for (let i = 0; i < 3; i++) t.equal((await call(`${proxy.url}/v10/users/@me`, { headers: { authorization: AUTH } })).status, 200)
  t.equal(up.seen.length, 3)
  const before = fake.bodies.length
  agent.checkInNow()
  await until('another check-in', () => fake.bodies.length > before)
  const first = checkins(fake)[0]!.rest_demand as { per_second: number; invalid_10m: number; held?: unknown }
  t.same(Object.keys(first).sort(), ['invalid_10m', 'per_second'], 'the first check-in: no share held yet')
  const last = checkins(fake).at(-1)!.rest_demand as { per_second: number; invalid_10m: number; held?: unknown }
  t.ok(last.per_second > 0, `demand ${last.per_second}/s`)
  t.equal(last.invalid_10m, 0)
  t.same(last.held, { per_second: 7.5, invalid_budget: 300 }, 'the share in force')
})

t.test('a controller without "rest": no share, the proxy holds everything, said once', async (t) => {
  const fake = await standIn(t, { signed: () => undefined })
  const { proxy, up } = await withProxy(t, { maxHoldMs: 300 })
  const logs: string[] = []
  const agent = agentWith(t, fake, proxy, logs)
  await agent.start()
  await until('three check-ins', () => fake.bodies.length >= 3, 20_000)
  t.equal(proxy.share(), null)
  t.equal((await call(`${proxy.url}/v10/users/@me`, { headers: { authorization: AUTH } })).status, 503)
  t.equal(up.seen.length, 0)
  t.equal(logs.filter((l) => l.includes('give no REST share')).length, 1, 'one log line, not one per check-in')
  t.notOk(JSON.stringify(checkins(fake).at(-1)).includes('held'), 'no held share reported')
})

t.test('the share ends at until when no newer plan comes (authority still held)', async (t) => {
  const fake = await standIn(t, { signed: () => ({ per_second: 5, invalid_budget: 10, until: inSeconds(1.5) }) })
  const { proxy } = await withProxy(t)
  const agent = agentWith(t, fake, proxy)
  await agent.start()
  await until('the share is in force', () => proxy.share() !== null)
  await fake.close() // no newer plan from now on
  await until('the share ran out', () => proxy.share() === null, 3000)
  t.equal(agent.status().state, 'active', 'the lease still holds: it was until that ended the share')
})

t.test('lost authority (no controller answers): share 0 at the fail-safe, before the lease ends', async (t) => {
  const fake = await standIn(t, { signed: () => ({ per_second: 5, invalid_budget: 10, until: inSeconds(LEASE + 60) }) })
  const { proxy } = await withProxy(t)
  const agent = agentWith(t, fake, proxy)
  await agent.start()
  await until('the share is in force', () => proxy.share() !== null)
  await fake.close()
  await until('authority lost', () => agent.status().state === 'no_authority', 10_000)
  t.equal(proxy.share(), null, 'no authority, no share, whatever until says')
})

t.test('leave() and stopNow(): share 0 at once', async (t) => {
  const fake = await standIn(t, { signed: () => ({ per_second: 5, invalid_budget: 10, until: inSeconds(LEASE) }) })
  for (const how of ['leave', 'stopNow'] as const) {
    const { proxy } = await withProxy(t)
    const agent = agentWith(t, fake, proxy)
    await agent.start()
    await until('the share is in force', () => proxy.share() !== null)
    const ending = how === 'leave' ? agent.leave() : agent.stopNow()
    t.equal(proxy.share(), null, `${how}: at once, before it resolves`)
    await ending
    t.equal(proxy.share(), null)
  }
})

t.test('a plan whose rest is malformed, or disagrees with the plain answer, is refused and changes nothing', async (t) => {
  type Mode = 'good' | 'mismatch' | 'signed_negative' | 'signed_fraction' | 'answer_negative'
  let mode: Mode = 'good'
  const good = () => ({ per_second: 5, invalid_budget: 10, until: inSeconds(LEASE) })
  const fake = await standIn(t, {
    signed: () => (mode === 'signed_negative' || mode === 'answer_negative' ? { ...good(), per_second: -5 } : mode === 'signed_fraction' ? { ...good(), invalid_budget: 2.5 } : good()),
    plain: () => (mode === 'mismatch' ? { ...good(), per_second: 45 } : mode === 'answer_negative' ? { ...good(), per_second: -5 } : good()),
  })
  const { proxy } = await withProxy(t)
  const outcomes: string[] = []
  const agent = recordingAgent(new Recorder(), idA, [urlOf(fake.port)], {
    restProxy: proxy,
    onEvent: (e) => {
      if (e.type === 'plan_refused') outcomes.push(e.reason)
      if (e.type === 'checkin_failed') outcomes.push('checkin_failed')
    },
  })
  t.teardown(() => agent.stop())
  await agent.start()
  await until('the share is in force', () => proxy.share() !== null)
  const expected: Record<Exclude<Mode, 'good'>, string> = { mismatch: 'plain_mismatch', signed_negative: 'malformed_payload', signed_fraction: 'malformed_payload', answer_negative: 'checkin_failed' }
  for (const [bad, outcome] of Object.entries(expected) as [Exclude<Mode, 'good'>, string][]) {
    mode = bad
    const seen = outcomes.length
    agent.checkInNow()
    await until(`the ${bad} answer refused`, () => outcomes.length > seen)
    t.equal(outcomes.at(-1), outcome, bad)
    t.match(proxy.share(), { perSecond: 5, invalidBudget: 10 }, `${bad}: the share in force is kept`)
  }
})
