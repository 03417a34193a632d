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

t.test('cold start; a drain by RESUME with 0 IDENTIFY, every event exactly once; an undrain with a refused resume', async (t) => {
  const e = await startGatewayEmulator({ shardCount: 8, maxConcurrency: 4, eventsPerSecond: 20, resumeWindowMs: 60_000 })
  const dir = join(root, 'drain')
  const ctl = await controllerIn(pki, dir, SETTINGS)
  // Armed for the undrain: the first session node-b hands back is refused when node-a RESUMEs it (Discord
  // drops sessions, e.g. after a long pause), so node-a must fall back to an IDENTIFY the controller grants.
  let refuseNext = false
  let refused: { shardId: number; sessionId: string } | null = null
  const a = node(e, idA, urlOf(ctl.port), 8)
  const b = node(e, idB, urlOf(ctl.port), 8, (shardId, session) => {
    if (!refuseNext || refused !== null || session === null) return
    refused = { shardId, sessionId: session.sessionId }
    e.invalidateSession(session.sessionId)
  })
  t.teardown(async () => {
    await Promise.all([a.agent.stop(), b.agent.stop()])
    await ctl.running.stop()
    await e.stop()
  })
  const settle = async () => {
    // let events flow on the moved sessions for a moment, then stop producing and let the last ones arrive
    await new Promise((r) => setTimeout(r, 500))
    e.pauseEvents()
    await new Promise((r) => setTimeout(r, 300))
  }

  await a.agent.start()
  await b.agent.start()
  await until('every shard READY on one node', () => a.shards.shardIds.length + b.shards.shardIds.length === 8 && e.sessions({ state: 'live' }).length === 8, 45_000)
  t.same(e.breaches, [], 'cold start: no bucket breach, no overlap')
  t.equal(e.stats.sessionsStarted.total, 8, 'one IDENTIFY per shard')
  t.equal(e.stats.gatewayBotRequests, 2, "one GET /gateway/bot per node, shared by the node's shards")

  // The drain: every shard of node-a moves to node-b by RESUME.
  const aShards = a.shards.shardIds
  const identifiesBeforeDrain = e.stats.identifies.total
  t.equal((await request(ctl.port, pki.ca, op, '/v1/nodes/node-a/drain', { body: { draining: true, force: true } })).status, 200)
  a.agent.checkInNow()
  await until('node-b runs every shard', () => b.shards.shardIds.length === 8 && a.shards.shardIds.length === 0, 45_000)
  await e.waitFor(() => e.sessions({ state: 'live' }).length === 8, { timeoutMs: 20_000, what: '8 live sessions' })
  await settle()
  t.same(e.breaches, [], 'the drain: no bucket breach, no overlap')
  t.equal(e.stats.identifies.total - identifiesBeforeDrain, 0, 'the drain: 0 IDENTIFY')
  t.equal(e.resumes.filter((r) => r.outcome === 'resumed').length, aShards.length, 'every moved shard RESUMEd')
  const drainReport = e.checkDelivery([...a.received, ...b.received])
  t.ok(drainReport.expected > 100, `${drainReport.expected} test events produced`)
  t.same(drainReport.lost, [], 'the drain: no event lost')
  t.same(drainReport.duplicated, [], 'the drain: no event delivered twice')
  t.same(drainReport.unknown, [])
  t.same(audit(dir).filter((l) => l.event === 'session_handed').map((l) => l.shard_id).sort(), [...aShards].sort(), 'the controller handed every moved shard its session')

  // The undrain: node-a takes its share back; one of the sessions it is handed is refused.
  e.resumeEvents()
  refuseNext = true
  const identifiesBeforeUndrain = e.stats.identifies.total
  t.equal((await request(ctl.port, pki.ca, op, '/v1/nodes/node-a/drain', { body: { draining: false } })).status, 200)
  b.agent.checkInNow()
  await until('both nodes run shards again', () => a.shards.shardIds.length > 0 && a.shards.shardIds.length + b.shards.shardIds.length === 8 && e.sessions({ state: 'live' }).length === 8, 45_000)
  await settle()
  t.same(e.breaches, [], 'the undrain: no bucket breach, no overlap')
  if (refused === null) throw new Error('node-b handed back no session')
  const { shardId: refusedShard, sessionId: refusedId } = refused as { shardId: number; sessionId: string }
  t.match(e.resumes.filter((r) => r.outcome === 'refused'), [{ sessionId: refusedId, reason: 'invalidated' }], 'the refused resume')
  t.equal(e.stats.identifies.total - identifiesBeforeUndrain, 1, 'the undrain: one IDENTIFY, for the refused resume')
  // At least 2: the cold start's and the fallback's. A grant that is older than maxGrantAgeMs when its
  // IDENTIFY would go out (counted from the claim: a loaded box) is not spent but claimed again.
  const fallbackGrants = audit(dir).filter((l) => l.event === 'identify_granted' && l.node_id === 'node-a' && l.shard_id === refusedShard).length
  t.ok(fallbackGrants >= 2, `node-a's fallback IDENTIFY of that shard was granted by the controller (${fallbackGrants} grants; its first was at the cold start)`)
  // Every session but the refused one: every event exactly once across both moves. The refused one ended
  // with node-b's stop (what came after was never delivered: Discord, too, drops a session it refuses).
  const received = [...a.received, ...b.received]
  const kept = e.sessions().map((s) => s.id).filter((id) => id !== refusedId)
  const report = e.checkDelivery(received.filter((r) => r.sessionId !== refusedId), { sessionIds: kept })
  t.same(report.lost, [], 'no event lost')
  t.same(report.duplicated, [], 'no event delivered twice')
  t.same(report.unknown, [])
  t.same(e.checkDelivery(received.filter((r) => r.sessionId === refusedId), { sessionIds: [refusedId] }).duplicated, [], 'nor twice from the refused session')

  // A stop for any other reason than a plan move (here the agents' shutdown) ends the sessions (close 1000).
  const live = e.sessions({ state: 'live' }).map((s) => s.id)
  await Promise.all([a.agent.stop(), b.agent.stop()])
  t.same([...a.shards.shardIds, ...b.shards.shardIds], [], 'nothing runs')
  t.same(live.map((id) => e.session(id)?.state), live.map(() => 'ended'), 'every session has ended: closed with 1000, not resumable')
  t.same(e.breaches, [])
})
