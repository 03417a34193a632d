// Session handoff end to end: real agents against a real controller over mTLS, judged by the
// controller's audit log. A join and a drain move shards by resume (session_handed, no Identify grant
// for them); an old owner that goes away without releasing deposits nothing, so the new owner
// Identifies under the bucket rule; a resume the host reports refused falls back to an Identify grant.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { NodeAgentOptions } from '../../src/agent/agent-options.js'
import type { NodeIdentity } from '../../src/agent/identity.js'
import { ResumeRefusedError, type ResumableSession } from '../../src/agent/session.js'
import type { ShardContext, ShardStopContext } from '../../src/agent/shard-runner.js'
import { bundle, makePki, request } from '../e2e/harness.js'
import { Recorder, controllerIn, nodeIdentities, recordingAgent, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

// Every shard its own bucket, so that only the handoff (never a busy bucket) can hold a new owner back.
const SETTINGS = {
  total_shards: 4,
  max_concurrency: 4,
  lease_seconds: 6,
  identify_interval_ms: 5000,
  session_handoff: { allowed_hosts: ['127.0.0.1'], ttl_seconds: 60 },
}
const GATEWAY = 'ws://127.0.0.1:4567' // never connected to: the hosts here are stand-ins
const root = testDir(t)
const pki = await makePki(root)
const [idA, idB] = await nodeIdentities(pki, ['node-a', 'node-b'])
const op = await bundle(pki, 'ops', 'operator')

/** The session a node's gateway client would report for a shard (letters and digits only). */
const sessionOf = (node: string, shard: number): ResumableSession => ({ sessionId: `S${node.replace(/\W/g, '')}x${shard}`, sequence: 1000 + shard, resumeUrl: GATEWAY })

interface AuditLine {
  readonly event: string
  readonly node_id?: string
  readonly shard_id?: number
  readonly time: string
}
const audit = (dir: string) => readFileSync(join(dir, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as AuditLine)
const shardsOf = (lines: AuditLine[], event: string, node: string) => lines.filter((l) => l.event === event && l.node_id === node).map((l) => l.shard_id!).sort((a, b) => a - b)

/** A recording agent whose gateway client hands over sessions and records what each start was given. */
function handoffAgent(rec: Recorder, starts: { node: string; ctx: ShardContext }[], id: NodeIdentity, url: string, extra: Partial<NodeAgentOptions> = {}) {
  const node = id.nodeId
  const record = (ctx: ShardContext | ShardStopContext, kind: 'start' | 'stop') =>
    rec.shardEvents.push({ at: performance.now(), wall: Date.now(), node, shard: ctx.shardId, totalShards: ctx.totalShards, maxConcurrency: ctx.maxConcurrency, kind, ...('reason' in ctx ? { reason: ctx.reason } : {}) })
  return recordingAgent(rec, id, [url], {
    onStart: (ctx) => {
      starts.push({ node, ctx })
      record(ctx, 'start')
    },
    onStop: (ctx) => {
      record(ctx, 'stop')
      return sessionOf(node, ctx.shardId)
    },
    ...extra,
  })
}

t.test('a join and a drain move shards by resume: session_handed, no Identify grant for the moved shards', async (t) => {
  const dir = join(root, 'planned')
  const ctl = await controllerIn(pki, dir, SETTINGS)
  t.teardown(() => ctl.running.stop())
  const rec = new Recorder()
  const starts: { node: string; ctx: ShardContext }[] = []
  const a = handoffAgent(rec, starts, idA, urlOf(ctl.port))
  const b = handoffAgent(rec, starts, idB, urlOf(ctl.port))
  t.teardown(() => Promise.all([a.stop(), b.stop()]))
  await a.start()
  await until('node-a runs its 4 shards', () => rec.running('node-a').length === 4)
  await b.start()
  await until('the join: node-b runs 2 and 3', () => rec.running('node-b').join() === '2,3' && rec.running('node-a').join() === '0,1')
  const drain = await request(ctl.port, pki.ca, op, '/v1/nodes/node-a/drain', { body: { draining: true, force: true } })
  t.equal(drain.status, 200, 'node-a set draining')
  a.checkInNow()
  await until('the drain: node-b runs every shard', () => rec.running('node-b').length === 4 && rec.running('node-a').length === 0)

  const lines = audit(dir)
  t.same(shardsOf(lines, 'identify_granted', 'node-a'), [0, 1, 2, 3], "node-a's first start: four Identify grants")
  t.same(shardsOf(lines, 'identify_granted', 'node-b'), [], 'none for node-b: every shard it took was resumed')
  t.same(shardsOf(lines, 'session_deposited', 'node-a'), [0, 1, 2, 3], 'node-a deposited each session in its release check-in')
  t.same(shardsOf(lines, 'session_handed', 'node-b'), [0, 1, 2, 3], 'and node-b was handed each one')
  const bStarts = starts.filter((s) => s.node === 'node-b').sort((x, y) => x.ctx.shardId - y.ctx.shardId)
  t.same(bStarts.map((s) => s.ctx.resume), [0, 1, 2, 3].map((shard) => sessionOf('node-a', shard)), "node-b's starts got node-a's sessions")
  t.ok(starts.filter((s) => s.node === 'node-a').every((s) => s.ctx.resume === null), "node-a's starts were Identifies")
  t.same(rec.events('node-b', 'shard_started').map((e) => e.event.mode), ['resume', 'resume', 'resume', 'resume'])
  t.same(rec.events('node-a', 'sessions_refused'), [], 'no deposit was refused')
  t.same(rec.events('node-a', 'sessions_deposited').flatMap((e) => e.event.shardIds).sort(), [0, 1, 2, 3])
  t.same(rec.overlaps(), [], 'no shard ran on two nodes at once')
  t.notMatch(readFileSync(join(dir, 'audit.log'), 'utf8'), /Snode[ab]x/, 'no session ID in the audit log')
})

t.test('an unplanned move (the old owner stops without a release): nothing deposited, the new owner Identifies under the bucket rule', async (t) => {
  const dir = join(root, 'unplanned')
  const ctl = await controllerIn(pki, dir, SETTINGS)
  t.teardown(() => ctl.running.stop())
  const rec = new Recorder()
  const starts: { node: string; ctx: ShardContext }[] = []
  const a = handoffAgent(rec, starts, idA, urlOf(ctl.port))
  const b = handoffAgent(rec, starts, idB, urlOf(ctl.port))
  t.teardown(() => Promise.all([a.stop(), b.stop()]))
  await a.start()
  await until('node-a runs its 4 shards', () => rec.running('node-a').length === 4)
  // Its host goes away: every shard stops (reason shutdown, sessions returned and discarded), no check-in.
  await a.stop()
  const checkinsBefore = audit(dir).length
  await b.start()
  await until("node-b runs every shard once node-a's lease ran out", () => rec.running('node-b').length === 4, 30_000)

  const lines = audit(dir)
  t.same(shardsOf(lines, 'session_deposited', 'node-a'), [], 'nothing was deposited')
  t.same(shardsOf(lines, 'session_handed', 'node-b'), [], 'nothing handed')
  t.same(shardsOf(lines, 'identify_granted', 'node-b'), [0, 1, 2, 3], 'node-b Identified every shard')
  t.ok(lines.slice(checkinsBefore).some((l) => l.event === 'node_expired' && l.node_id === 'node-a'), 'after node-a expired')
  const grants = lines.filter((l) => l.event === 'identify_granted')
  for (const shard of [0, 1, 2, 3]) {
    const times = grants.filter((l) => l.shard_id === shard).map((l) => Date.parse(l.time))
    t.ok(times.length === 2 && times[1]! - times[0]! >= 5000, `bucket ${shard}: the grants ${times[1]! - times[0]!} ms apart`)
  }
  t.ok(starts.filter((s) => s.node === 'node-b').every((s) => s.ctx.resume === null), 'no start was given a session')
  t.ok(rec.events('node-a', 'sessions_dropped').some((e) => e.event.reason === 'not_a_plan_move'), "node-a's host returned sessions: discarded")
  t.same(rec.overlaps(), [], 'no shard ran on two nodes at once')
})

t.test('a resume the host reports refused (ResumeRefusedError) falls back to an Identify grant', async (t) => {
  const dir = join(root, 'refused')
  const ctl = await controllerIn(pki, dir, SETTINGS)
  t.teardown(() => ctl.running.stop())
  const rec = new Recorder()
  const starts: { node: string; ctx: ShardContext }[] = []
  const a = handoffAgent(rec, starts, idA, urlOf(ctl.port))
  const refused = new Set<number>()
  const b = handoffAgent(rec, starts, idB, urlOf(ctl.port), {
    onStart: (ctx) => {
      starts.push({ node: 'node-b', ctx })
      // The gateway answers shard 3's RESUME with INVALID_SESSION: the session is gone.
      if (ctx.shardId === 3 && ctx.resume !== null) {
        refused.add(3)
        throw new ResumeRefusedError()
      }
      rec.shardEvents.push({ at: performance.now(), wall: Date.now(), node: 'node-b', shard: ctx.shardId, totalShards: ctx.totalShards, maxConcurrency: ctx.maxConcurrency, kind: 'start' })
    },
  })
  t.teardown(() => Promise.all([a.stop(), b.stop()]))
  await a.start()
  await until('node-a runs its 4 shards', () => rec.running('node-a').length === 4)
  await b.start()
  await until('node-b runs 2 and 3', () => rec.running('node-b').join() === '2,3', 20_000)

  t.same([...refused], [3])
  t.same(starts.filter((s) => s.node === 'node-b' && s.ctx.shardId === 3).map((s) => s.ctx.resume), [sessionOf('node-a', 3), null], 'shard 3: the resume, then an Identify')
  const lines = audit(dir)
  t.same(shardsOf(lines, 'session_handed', 'node-b'), [2, 3], 'both sessions were handed')
  t.same(shardsOf(lines, 'identify_granted', 'node-b'), [3], 'shard 3 was then granted an Identify (fresh), shard 2 needed none')
  const handed = lines.findIndex((l) => l.event === 'session_handed' && l.shard_id === 3)
  const granted = lines.findIndex((l) => l.event === 'identify_granted' && l.node_id === 'node-b')
  t.ok(handed < granted, 'the grant came after the hand-out')
  const bucket3 = lines.filter((l) => l.event === 'identify_granted' && l.shard_id === 3).map((l) => Date.parse(l.time))
  t.ok(bucket3[1]! - bucket3[0]! >= 5000, `bucket 3: the fresh grant waited the interval after node-a's (${bucket3[1]! - bucket3[0]!} ms)`)
  t.same(rec.events('node-b', 'resume_refused').map((e) => e.event.shardId), [3])
  t.same(rec.events('node-b', 'shard_started').map((e) => [e.event.shardId, e.event.mode]).sort(), [[2, 'resume'], [3, 'identify']])
  t.same(rec.overlaps(), [], 'no shard ran on two nodes at once')
})
