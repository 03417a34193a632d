// The discord.js adapter end to end: real NodeAgents running their shards through DiscordjsShards on
// @discordjs/ws 2.0.4, a real controller over mTLS, and the gateway emulator standing in for Discord
// (enforcing its rules and recording every breach). A cold start of two nodes identifies every shard
// with no bucket breach; a drain moves shards by RESUME with no IDENTIFY and every event of every
// session reaches the bot exactly once across both nodes; a refused resume falls back to a granted IDENTIFY.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { REST } from '@discordjs/rest'
import type { NodeIdentity } from '../../src/agent/identity.js'
import { NodeAgent } from '../../src/agent/node-agent.js'
import type { ResumableSession } from '../../src/agent/session.js'
import { DiscordjsShards } from '../../src/discordjs/index.js'
import { bundle, makePki, request } from '../e2e/harness.js'
import { controllerIn, FAST, nodeIdentities, until, urlOf } from '../agent/support.js'
import { startGatewayEmulator, type GatewayEmulator } from '../support/gateway/gateway-emulator.js'
import type { ReceivedEvent } from '../support/gateway/delivery-check.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const [idA, idB] = await nodeIdentities(pki, ['node-a', 'node-b'])
const op = await bundle(pki, 'ops', 'operator')

// 8 shards in 4 buckets: each bucket's second IDENTIFY must come a whole interval after its first. The
// controller spaces grants 5.5 s apart against Discord's 5 s: the slack covers the time from a grant to
// the IDENTIFY it pays for (connect, HELLO), which differs from shard to shard.
const SETTINGS = { total_shards: 8, max_concurrency: 4, lease_seconds: 9, identify_interval_ms: 5500, session_handoff: { allowed_hosts: ['127.0.0.1'], ttl_seconds: 60 } }

interface Node {
  readonly agent: NodeAgent
  readonly shards: DiscordjsShards
  readonly received: ReceivedEvent[]
}

/** `afterStop` sees each stop's result before the agent does (a test refuses a deposited session there). */
function node(e: GatewayEmulator, id: NodeIdentity, controller: string, capacity: number, afterStop: (shardId: number, session: ResumableSession | null) => void = () => undefined): Node {
  const received: ReceivedEvent[] = []
  const shards = new DiscordjsShards({
    token: e.token,
    intents: 0,
    wsOptions: { rest: new REST({ api: e.apiUrl }).setToken(e.token) },
    onDispatch: (shardId, payload) => {
      const entry = e.deliveryEntry(shardId, payload)
      if (entry !== null) received.push(entry)
    },
  })
  const agent = new NodeAgent({
    identity: id,
    controllers: [controller],
    capacity,
    ...FAST,
    identifyIntervalMs: SETTINGS.identify_interval_ms,
    onStart: (ctx) => shards.onStart(ctx),
    onStop: async (ctx) => {
      const session = (await shards.onStop(ctx)) ?? null
      afterStop(ctx.shardId, session)
      return session
    },
  })
  return { agent, shards, received }
}

const audit = (dir: string) =>
  readFileSync(join(dir, 'audit.log'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { event: string; node_id?: string; shard_id?: number })

t.test('cold start, drain by RESUME with exactly-once delivery, refused resume', async (t) => {
  const e = await startGatewayEmulator({ shardCount: 8, maxConcurrency: 4, eventsPerSecond: 20, resumeWindowMs: 60_000 })
  const dir = join(root, 'drain')
  const ctl = await controllerIn(pki, dir, SETTINGS)
  // The session of the first shard node-a hands over is refused when its new owner RESUMEs it (Discord
  // drops sessions, e.g. after a long pause): that owner must fall back to an IDENTIFY the controller grants.
  let refused: { shardId: number; sessionId: string } | null = null
  const a = node(e, idA, urlOf(ctl.port), 8, (shardId, session) => {
    if (refused !== null || session === null) return
    refused = { shardId, sessionId: session.sessionId }
    e.invalidateSession(session.sessionId)
  })
  const b = node(e, idB, urlOf(ctl.port), 8)
  t.teardown(async () => {
    await Promise.all([a.agent.stop(), b.agent.stop()])
    await ctl.running.stop()
    await e.stop()
  })

  await a.agent.start()
  await b.agent.start()
  await until('every shard READY on one node', () => a.shards.shardIds.length + b.shards.shardIds.length === 8 && e.sessions({ state: 'live' }).length === 8, 45_000)
  t.same(e.breaches, [], 'cold start: no bucket breach, no overlap')
  t.equal(e.stats.sessionsStarted.total, 8, 'one IDENTIFY per shard')
  t.equal(e.stats.gatewayBotRequests, 2, "one GET /gateway/bot per node, shared by the node's shards")

  const aShards = a.shards.shardIds
  const identifiesBefore = e.stats.identifies.total
  t.equal((await request(ctl.port, pki.ca, op, '/v1/nodes/node-a/drain', { body: { draining: true } })).status, 200)
  a.agent.checkInNow()
  await until('node-b runs every shard', () => b.shards.shardIds.length === 8 && a.shards.shardIds.length === 0, 45_000)
  await e.waitFor(() => e.sessions({ state: 'live' }).length === 8, { timeoutMs: 20_000, what: '8 live sessions' })
  // let events flow on the moved sessions for a moment, then stop producing and let the last ones arrive
  await new Promise((r) => setTimeout(r, 500))
  e.pauseEvents()
  await new Promise((r) => setTimeout(r, 300))

  t.same(e.breaches, [], 'no bucket breach, no overlap, nothing else')
  if (refused === null) throw new Error('node-a deposited no session')
  const { shardId: refusedShard, sessionId: refusedId } = refused as { shardId: number; sessionId: string }
  const moved = aShards.length
  const resumed = e.resumes.filter((r) => r.outcome === 'resumed')
  t.equal(resumed.length, moved - 1, 'every moved shard but the invalidated one RESUMEd')
  t.match(e.resumes.filter((r) => r.outcome === 'refused'), [{ sessionId: refusedId, reason: 'invalidated' }], 'the refused resume')
  t.equal(e.stats.identifies.total - identifiesBefore, 1, 'one IDENTIFY during the drain: the refused resume')
  const lines = audit(dir)
  t.same(lines.filter((l) => l.event === 'session_handed').map((l) => l.shard_id).sort(), [...aShards].sort(), 'the controller handed every moved shard its session')
  t.equal(lines.filter((l) => l.event === 'identify_granted' && l.node_id === 'node-b' && l.shard_id === refusedShard).length, 1, 'the fallback IDENTIFY was granted by the controller')
  // Every session but the refused one: every event exactly once, across the move. The refused one ended
  // with node-a's stop (what came after was never delivered: Discord, too, drops a session it refuses).
  const received = [...a.received, ...b.received]
  const kept = e.sessions().map((s) => s.id).filter((id) => id !== refusedId)
  const report = e.checkDelivery(received.filter((r) => r.sessionId !== refusedId), { sessionIds: kept })
  t.ok(report.expected > 100, `${report.expected} test events produced`)
  t.same(report.lost, [], 'no event lost')
  t.same(report.duplicated, [], 'no event delivered twice')
  t.same(report.unknown, [])
  t.same(e.checkDelivery(received.filter((r) => r.sessionId === refusedId), { sessionIds: [refusedId] }).duplicated, [], 'nor twice from the refused session')

  // A stop for any other reason than a plan move (here the agent's shutdown) ends the sessions (close 1000).
  const live = e.sessions({ state: 'live' }).map((s) => s.id)
  await b.agent.stop()
  t.same(b.shards.shardIds, [], 'node-b runs nothing')
  t.same(live.map((id) => e.session(id)?.state), live.map(() => 'ended'), 'every session node-b ran has ended: closed with 1000, not resumable')
  t.same(e.breaches, [])
})
