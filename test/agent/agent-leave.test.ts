// agent.leave() (SPEC "Leaving on purpose"). Against a real controller over mTLS: every shard stops with
// reason "leave", its session rides in the leaving check-in, the controller takes the node out at once
// (node_left, no expiry) and the other node RESUMEs the moved shards with those sessions. Against stand-ins:
// the leave's body, its failover on a 503, a stop that fails (no leave: the shard may still run), an
// unreachable controller (bounded, the agent still halts), and stopNow() cutting a slow leave short.
import t, { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { NodeIdentity } from '../../src/agent/identity.js'
import type { ResumableSession } from '../../src/agent/session.js'
import type { ShardContext, ShardStopContext } from '../../src/agent/shard-runner.js'
import { parsePlanKeys } from '../../src/signing/plan-keys.js'
import { PlanSigner } from '../../src/signing/plan-signer.js'
import { bundle, makePki, request } from '../e2e/harness.js'
import { Recorder, controllerIn, fakeController, nodeIdentities, recordingAgent, until, urlOf, type FakeController } from './support.js'
import { testDir } from '../support/test-dir.js'

const SETTINGS = { total_shards: 4, max_concurrency: 4, lease_seconds: 6, identify_interval_ms: 5000, session_handoff: { allowed_hosts: ['127.0.0.1'], ttl_seconds: 60 } }
const GATEWAY = 'ws://127.0.0.1:4567' // never connected to: the hosts here are stand-ins
const root = testDir(t)
const pki = await makePki(root)
const [idA, idB] = await nodeIdentities(pki, ['node-a', 'node-b'])
const op = await bundle(pki, 'ops', 'operator')
const signer = new PlanSigner(await parsePlanKeys(JSON.parse(readFileSync(join(pki.dir, 'plan-keys.json'), 'utf8')), 'plan-keys.json'))

const sessionOf = (node: string, shard: number): ResumableSession => ({ sessionId: `S${node.replace(/\W/g, '')}x${shard}`, sequence: 1000 + shard, resumeUrl: GATEWAY })
const audit = (dir: string) => readFileSync(join(dir, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event: string; node_id?: string; shard_id?: number })

/** A recording agent whose gateway client hands over a session on every stop and records each start's context. */
function handoffAgent(rec: Recorder, starts: { node: string; ctx: ShardContext }[], id: NodeIdentity, urls: string[], onStop?: (ctx: ShardStopContext) => Promise<void> | void) {
  const node = id.nodeId
  return recordingAgent(rec, id, urls, {
    onStart: (ctx) => {
      starts.push({ node, ctx })
      rec.shardEvents.push({ at: performance.now(), wall: Date.now(), node, shard: ctx.shardId, totalShards: ctx.totalShards, maxConcurrency: ctx.maxConcurrency, kind: 'start' })
    },
    onStop: async (ctx) => {
      await onStop?.(ctx)
      rec.shardEvents.push({ at: performance.now(), wall: Date.now(), node, shard: ctx.shardId, totalShards: ctx.totalShards, maxConcurrency: ctx.maxConcurrency, kind: 'stop', reason: ctx.reason })
      return sessionOf(node, ctx.shardId)
    },
  })
}

t.test('a leave: every shard stops, its session is deposited, and the other node resumes them at once', async (t) => {
  const dir = join(root, 'real')
  const ctl = await controllerIn(pki, dir, SETTINGS)
  t.teardown(() => ctl.running.stop())
  const rec = new Recorder()
  const starts: { node: string; ctx: ShardContext }[] = []
  const a = handoffAgent(rec, starts, idA, [urlOf(ctl.port)])
  const b = handoffAgent(rec, starts, idB, [urlOf(ctl.port)])
  t.teardown(() => Promise.all([a.stop(), b.stop()]))
  await a.start()
  await until('node-a runs its 4 shards', () => rec.running('node-a').length === 4)
  await b.start()
  await until('the join: node-b runs 2 and 3', () => rec.running('node-b').join() === '2,3' && rec.running('node-a').join() === '0,1')

  const end = await a.leave()
  t.same(end, { reason: 'shutdown', detail: 'left on purpose' })
  t.same(rec.shardEvents.filter((e) => e.node === 'node-a' && e.kind === 'stop' && e.reason === 'leave').map((e) => e.shard).sort(), [0, 1], 'every shard stopped for the leave')
  t.equal(rec.events('node-a', 'left').length, 1)
  t.same(rec.events('node-a', 'sessions_deposited').at(-1)?.event.shardIds, [0, 1], 'the sessions of the shards it owned went with the leave')
  const plan = (await request(ctl.port, pki.ca, op, '/v1/plan')).json as { nodes: { node_id: string }[] }
  t.same(plan.nodes.map((n) => n.node_id), ['node-b'], 'out of the plan at once')
  b.checkInNow() // the next regular check-in would do the same, within lease/3
  await until('node-b runs every shard', () => rec.running('node-b').length === 4)

  const lines = audit(dir)
  t.ok(lines.some((l) => l.event === 'node_left' && l.node_id === 'node-a'), 'audited node_left')
  t.notOk(lines.some((l) => l.event === 'node_expired'), 'no lease ran out')
  t.same(lines.filter((l) => l.event === 'session_handed' && l.node_id === 'node-b').map((l) => l.shard_id).sort(), [0, 1, 2, 3], 'node-b was handed every session')
  t.same(lines.filter((l) => l.event === 'identify_granted' && l.node_id === 'node-b'), [], 'node-b spent no Identify')
  const resumed = starts.filter((s) => s.node === 'node-b' && s.ctx.shardId < 2).sort((x, y) => x.ctx.shardId - y.ctx.shardId)
  t.same(resumed.map((s) => s.ctx.resume), [sessionOf('node-a', 0), sessionOf('node-a', 1)], "node-b's starts of 0 and 1 got node-a's sessions")
  t.same(rec.overlaps(), [], 'no shard ran on two nodes at once')
  t.same(await a.leave(), end, 'a second leave() is the same')
})

/** A stand-in answering check-ins with a signed plan giving node-a `assigned`, or with `onLeave` for the leave. */
async function standIn(t: Test, assigned: number[], onLeave: (body: Record<string, unknown>) => { status: number; body: unknown }): Promise<FakeController> {
  const fake = await fakeController(pki, (_cn, path, sent) => {
    const body = sent as Record<string, unknown>
    if (path === '/v1/checkin' && body.leaving === true) return onLeave(body)
    if (path !== '/v1/checkin') return { status: 200, body: { granted: true, shard_id: body.shard_id, bucket: Number(body.shard_id) % 4, generation: 3, mode: 'identify' } }
    const plain = { generation: 3, total_shards: 4, assigned, range_start: assigned[0] ?? 0, range_count: assigned.length, lease_seconds: 6, max_concurrency: 4 }
    const iat = Math.floor(Date.now() / 1000)
    return { status: 200, body: { ...plain, plan_jws: signer.signPayload(JSON.stringify({ iss: 'stand-in', sub: 'node-a', iat, exp: iat + 6, ...plain })) } }
  })
  t.teardown(() => fake.close())
  return fake
}
const answered = { status: 200, body: { note: 'a stand-in does not re-plan' } }
const leaves = (fake: FakeController) => fake.bodies.filter((b) => (b as { leaving?: boolean } | undefined)?.leaving === true) as Record<string, unknown>[]

t.test("the leave's body, and a 503 fails over to the next controller", async (t) => {
  const first = await standIn(t, [0, 1], () => ({ status: 503, body: { error: 'unavailable', message: 'not now' } }))
  const second = await standIn(t, [0, 1], () => answered)
  const rec = new Recorder()
  const a = handoffAgent(rec, [], idA, [urlOf(first.port), urlOf(second.port)])
  t.teardown(() => a.stop())
  await a.start()
  await until('node-a runs 0 and 1', () => rec.running('node-a').length === 2)
  await a.leave()
  t.equal(leaves(first).length, 1, 'the first controller answered 503')
  t.same(leaves(second), [
    {
      node_id: 'node-a', capacity: 4, ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0, generation: 3, leaving: true,
      sessions: [0, 1].map((shard) => ({ shard_id: shard, session_id: sessionOf('node-a', shard).sessionId, sequence: 1000 + shard, resume_url: GATEWAY })),
    },
  ], 'counts 0, its generation, the sessions of every shard it ran')
  t.equal(rec.events('node-a', 'left')[0]?.event.controller, urlOf(second.port))
})

t.test('a stop that fails: no leave is sent (the shard may still run), and the agent still halts', async (t) => {
  const fake = await standIn(t, [0, 1], () => answered)
  const rec = new Recorder()
  const a = handoffAgent(rec, [], idA, [urlOf(fake.port)], (ctx) => {
    if (ctx.shardId === 1) throw new Error('stuck')
  })
  await a.start()
  await until('node-a runs 0 and 1', () => rec.running('node-a').length === 2)
  const end = await a.leave()
  t.equal(end.reason, 'shutdown')
  t.same(leaves(fake), [], 'no leave')
  t.match(rec.events('node-a', 'leave_failed')[0]?.event, { detail: /not every shard stopped/ })
})

t.test('an unreachable controller: the leave is given up within its bound and the agent halts', async (t) => {
  const fake = await standIn(t, [0], () => answered)
  const rec = new Recorder()
  const a = handoffAgent(rec, [], idA, [urlOf(fake.port)])
  await a.start()
  await until('node-a runs 0', () => rec.running('node-a').length === 1)
  await fake.close() // connections refused from now on
  const end = await a.leave()
  t.equal(end.reason, 'shutdown')
  t.equal(rec.events('node-a', 'left').length, 0)
  t.equal(rec.events('node-a', 'leave_failed').length, 1, 'said so')
  t.same(rec.running('node-a'), [], 'every shard stopped')
})

t.test('stopNow() during a slow leave stop: the stop is cut short, no leave is sent, the agent halts at once', async (t) => {
  const fake = await standIn(t, [0, 1], () => answered)
  const rec = new Recorder()
  const a = handoffAgent(rec, [], idA, [urlOf(fake.port)], (ctx) => new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve())))
  await a.start()
  await until('node-a runs 0 and 1', () => rec.running('node-a').length === 2)
  const leaving = a.leave()
  await until('both stops under way', () => a.status().stopping.length === 2)
  const end = await a.stopNow()
  t.equal(end.reason, 'shutdown')
  t.same(await leaving, end)
  t.same(rec.events('node-a', 'shard_stop_cut_short').map((e) => e.event.shardId).sort(), [0, 1], 'both stops cut short, said so')
  t.same(leaves(fake), [], 'no leave')
})
