// A real agent against a scripted controller over mTLS (plans signed with the PKI's own plan key): the
// session of a shard the plan moved away rides in the release check-in; a network failure keeps it for
// that check-in's retry; a 400 drops it and sends the same report again at once without it; a resume
// grant reaches onStart, and a refused resume claims a fresh Identify and starts again. No session ID
// ever reaches the log.
import t, { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { ResumeRefusedError, type ResumableSession } from '../../src/agent/session.js'
import { parsePlanKeys } from '../../src/signing/plan-keys.js'
import { PlanSigner } from '../../src/signing/plan-signer.js'
import { makePki } from '../e2e/harness.js'
import { Recorder, fakeController, nodeIdentity, recordingAgent, until, urlOf, type FakeController } from './support.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const id = await nodeIdentity(pki, 'node-a')
const signer = new PlanSigner(await parsePlanKeys(JSON.parse(readFileSync(join(pki.dir, 'plan-keys.json'), 'utf8')), 'plan-keys.json'))
const SESSION: ResumableSession = { sessionId: 'sEcReT0session0id', sequence: 4711, resumeUrl: 'wss://gateway-us-east1-b.discord.gg' }
const WIRE = { session_id: SESSION.sessionId, sequence: SESSION.sequence, resume_url: SESSION.resumeUrl }

interface Script {
  generation: number
  assigned: number[]
  /** Answers a check-in body before the plan does (return null for the plan). */
  checkin?: (body: Record<string, unknown>) => { status: number; body: unknown } | null
  /** Answers a claim body (default: an Identify grant). */
  identify?: (body: Record<string, unknown>) => unknown
}

function planAnswer(s: Script) {
  const plain = { generation: s.generation, total_shards: 4, assigned: s.assigned, range_start: s.assigned[0] ?? 0, range_count: s.assigned.length, lease_seconds: 6, max_concurrency: 4 }
  const iat = Math.floor(Date.now() / 1000)
  return { ...plain, plan_jws: signer.signPayload(JSON.stringify({ iss: 'scripted', sub: 'node-a', iat, exp: iat + 6, ...plain })) }
}

async function scripted(t: Test, s: Script): Promise<FakeController> {
  const fake = await fakeController(pki, (_cn, path, sent) => {
    const body = sent as Record<string, unknown>
    if (path === '/v1/checkin') return s.checkin?.(body) ?? { status: 200, body: planAnswer(s) }
    const granted = { granted: true, shard_id: body.shard_id, bucket: Number(body.shard_id) % 4, generation: s.generation, mode: 'identify' }
    return { status: 200, body: s.identify?.(body) ?? granted }
  })
  t.teardown(() => fake.close())
  return fake
}

/** A pino logger into a string, to check what reaches the log. */
function capturedLog() {
  let text = ''
  const stream = new Writable({ write: (chunk: Buffer, _enc, done) => ((text += chunk.toString()), done()) })
  return { logger: pino({ level: 'debug' }, stream), text: () => text }
}

const checkins = (fake: FakeController) => fake.bodies.filter((_, i) => fake.seen[i]!.endsWith('/v1/checkin')) as Record<string, unknown>[]
const claims = (fake: FakeController) => fake.bodies.filter((_, i) => fake.seen[i]!.endsWith('/v1/identify')) as Record<string, unknown>[]

t.test('the session of a moved shard rides in the release check-in, and only there', async (t) => {
  const script: Script = { generation: 1, assigned: [0, 1] }
  const fake = await scripted(t, script)
  const rec = new Recorder()
  const log = capturedLog()
  const agent = recordingAgent(rec, id, [urlOf(fake.port)], { logger: log.logger, onStop: () => SESSION })
  t.teardown(() => agent.stop())
  await agent.start()
  await until('node-a runs 0 and 1', () => agent.status().running.length === 2)
  Object.assign(script, { generation: 2, assigned: [0] })
  agent.checkInNow()
  await until('the session was deposited', () => rec.events('node-a', 'sessions_deposited').length === 1)
  const release = checkins(fake).find((b) => b.sessions !== undefined)!
  t.equal(release.generation, 2, 'in the check-in that reports the new generation')
  t.same(release.sessions, [{ shard_id: 1, ...WIRE }])
  t.same(rec.events('node-a', 'sessions_deposited')[0]!.event.shardIds, [1])
  agent.checkInNow()
  await until('one more check-in', () => checkins(fake).indexOf(release) < checkins(fake).length - 1)
  t.equal(checkins(fake).filter((b) => b.sessions !== undefined).length, 1, 'deposited once')
  await agent.stop()
  t.equal(checkins(fake).filter((b) => b.sessions !== undefined).length, 1, 'a shutdown stop deposits nothing')
  t.ok(rec.events('node-a', 'sessions_dropped').some((e) => e.event.reason === 'not_a_plan_move'), 'its session is discarded, said so')
  t.notMatch(log.text(), SESSION.sessionId, 'no session ID in the log')
})

t.test('a 503 keeps the sessions for the retry; a 400 drops them and the same report goes again at once without', async (t) => {
  const answers = [{ status: 503, body: { error: 'unavailable', message: 'not now' } }, { status: 400, body: { error: 'invalid_request', message: 'sessions[0]: no pending handoff' } }]
  const script: Script = { generation: 1, assigned: [0, 1], checkin: (body) => (body.sessions === undefined ? null : answers.shift() ?? null) }
  const fake = await scripted(t, script)
  const rec = new Recorder()
  const log = capturedLog()
  const agent = recordingAgent(rec, id, [urlOf(fake.port)], { logger: log.logger, onStop: () => SESSION })
  t.teardown(() => agent.stop())
  await agent.start()
  await until('node-a runs 0 and 1', () => agent.status().running.length === 2)
  Object.assign(script, { generation: 2, assigned: [0] })
  agent.checkInNow()
  const withSessions = () => checkins(fake).filter((b) => b.sessions !== undefined).length
  await until('generation 2 reported without sessions after the refusal', () => withSessions() === 2 && checkins(fake).at(-1)?.sessions === undefined && checkins(fake).at(-1)?.generation === 2)
  await until('its answer accepted', () => rec.events('node-a', 'plan_accepted').filter((e) => e.event.generation === 2).length >= 2)
  const requests = fake.seen.map((line, i) => ({ path: line.split(' ')[2], body: fake.bodies[i] as Record<string, unknown> }))
  const first = requests.findIndex((r) => r.body.sessions !== undefined)
  const shape = (r: (typeof requests)[number] | undefined) => r && [r.path, r.body.generation, r.body.sessions === undefined ? 'none' : 'sessions']
  t.same(shape(requests[first]), ['/v1/checkin', 2, 'sessions'], 'the release check-in (answered 503)')
  const second = requests.findIndex((r, i) => i > first && r.body.sessions !== undefined)
  t.ok(second > first, 'kept for the retry of the same check-in (answered 400)')
  t.same(shape(requests[second + 1]), ['/v1/checkin', 2, 'none'], 'the very next request: the same report without sessions')
  t.same(rec.events('node-a', 'sessions_refused')[0]!.event.shardIds, [1])
  t.equal(rec.events('node-a', 'sessions_refused')[0]!.event.status, 400)
  t.equal(agent.status().reportedGeneration, 2)
  t.equal(agent.status().state, 'active', 'renewed by the check-in without sessions')
  t.equal(checkins(fake).filter((b) => b.sessions !== undefined).length, 2, 'never offered again')
  const warn = log.text().split('\n').filter((l) => l.includes('"event":"sessions_refused"'))
  t.equal(warn.length, 1)
  t.equal(JSON.parse(warn[0]!).level, 40, 'logged at warn')
  t.notMatch(log.text(), SESSION.sessionId, 'no session ID in the log')
  t.notMatch(log.text(), 'no pending handoff', "the controller's message (which may quote input) is not logged")
})

t.test('a 400 naming one refused shard: the rest of the deposit goes once more, without it', async (t) => {
  const answers = [{ status: 400, body: { error: 'invalid_request', message: 'sessions[1]: shard 2 has no pending handoff from this node', refused_shard_id: 2 } }]
  const script: Script = { generation: 1, assigned: [0, 1, 2, 3], checkin: (body) => (body.sessions === undefined ? null : answers.shift() ?? null) }
  const fake = await scripted(t, script)
  const rec = new Recorder()
  const agent = recordingAgent(rec, id, [urlOf(fake.port)], { onStop: () => SESSION })
  t.teardown(() => agent.stop())
  await agent.start()
  await until('node-a runs 0..3', () => agent.status().running.length === 4)
  Object.assign(script, { generation: 2, assigned: [0] })
  agent.checkInNow()
  await until('the rest was deposited', () => rec.events('node-a', 'sessions_deposited').length === 1)
  const offers = checkins(fake).filter((b) => b.sessions !== undefined).map((b) => (b.sessions as { shard_id: number }[]).map((e) => e.shard_id))
  t.same(offers, [[1, 2, 3], [1, 3]], 'the whole deposit, then the rest without the refused shard')
  t.same(rec.events('node-a', 'sessions_refused')[0]!.event.shardIds, [1, 2, 3])
  t.same(rec.events('node-a', 'sessions_deposited')[0]!.event.shardIds, [1, 3])
  t.equal(agent.status().reportedGeneration, 2)
})

t.test('an invalid session from onStop is dropped with an event and never sent', async (t) => {
  const script: Script = { generation: 1, assigned: [0, 1] }
  const fake = await scripted(t, script)
  const rec = new Recorder()
  const agent = recordingAgent(rec, id, [urlOf(fake.port)], { onStop: () => ({ ...SESSION, resumeUrl: 'https://evil.example' }) })
  t.teardown(() => agent.stop())
  await agent.start()
  await until('node-a runs 0 and 1', () => agent.status().running.length === 2)
  Object.assign(script, { generation: 2, assigned: [0] })
  agent.checkInNow()
  await until('generation 2 reported', () => checkins(fake).some((b) => b.generation === 2))
  t.equal(checkins(fake).filter((b) => b.sessions !== undefined).length, 0)
  const dropped = rec.events('node-a', 'sessions_dropped')
  t.same(dropped.map((e) => [e.event.reason, e.event.shardIds]), [['invalid', [1]]])
  t.match(dropped[0]!.event.detail, /resumeUrl must be a wss:\/\/ URL/)
})

t.test('a resume grant reaches onStart; a refused resume claims fresh and starts again; claimFreshIdentify claims fresh', async (t) => {
  const script: Script = {
    generation: 1,
    assigned: [0],
    identify: (body) => (body.fresh === true ? null : { granted: true, mode: 'resume', shard_id: 0, bucket: 0, generation: 1, session: WIRE }),
  }
  const fake = await scripted(t, script)
  const rec = new Recorder()
  const log = capturedLog()
  const starts: (ResumableSession | null)[] = []
  let reidentified = false
  const agent = recordingAgent(rec, id, [urlOf(fake.port)], {
    logger: log.logger,
    identifyIntervalMs: 0,
    onStart: async (ctx) => {
      starts.push(ctx.resume)
      if (ctx.resume !== null) throw new ResumeRefusedError()
      await ctx.claimFreshIdentify() // as a gateway client would before a later IDENTIFY
      reidentified = true
    },
  })
  t.teardown(() => agent.stop())
  await agent.start()
  await until('shard 0 started', () => agent.status().running.length === 1)
  t.same(starts, [SESSION, null], 'first with the session, then as an Identify')
  t.ok(reidentified)
  t.same(claims(fake), [{ node_id: 'node-a', shard_id: 0 }, { node_id: 'node-a', shard_id: 0, fresh: true }, { node_id: 'node-a', shard_id: 0, fresh: true }])
  t.same(rec.events('node-a', 'resume_refused').map((e) => e.event.shardId), [0])
  t.same(rec.events('node-a', 'shard_started').map((e) => e.event.mode), ['identify'])
  t.same(rec.events('node-a', 'claim').map((e) => e.event.outcome.kind === 'granted' && e.event.outcome.mode), ['resume', 'identify', 'identify'])
  t.notMatch(log.text(), SESSION.sessionId, 'no session ID in the log, the claim events included')
  const metrics = await agent.metrics.metrics()
  t.match(metrics, /^pxe_node_resumes_total\{result="refused"\} 1$/m, 'the agent\'s metrics count the refused resume')
  t.match(metrics, /^pxe_node_identify_claims_total\{result="resumed"\} 1$/m)
  t.match(metrics, /^pxe_node_identify_claims_total\{result="granted"\} 2$/m)
  t.notMatch(metrics, SESSION.sessionId, 'no session ID in the metrics')
})
