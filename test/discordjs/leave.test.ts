// A node running the discord.js adapter leaves (agent.leave(): SPEC "Leaving on purpose"): its shards close
// resumably (4200), their sessions go with the leaving check-in, and the other node RESUMEs every one of
// them: 0 IDENTIFY, every event exactly once across both nodes, no breach of Discord's rules, and the
// controller audits node_left (no lease runs out). Real NodeAgents, @discordjs/ws 2.0.4, a real controller
// over mTLS, the gateway emulator standing in for Discord.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { REST } from '@discordjs/rest'
import type { NodeIdentity } from '../../src/agent/identity.js'
import { NodeAgent } from '../../src/agent/node-agent.js'
import { DiscordjsShards } from '../../src/discordjs/index.js'
import { makePki } from '../e2e/harness.js'
import { controllerIn, FAST, nodeIdentities, until, urlOf } from '../agent/support.js'
import { startGatewayEmulator, type GatewayEmulator } from '../support/gateway/gateway-emulator.js'
import type { ReceivedEvent } from '../support/gateway/delivery-check.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const [idA, idB] = await nodeIdentities(pki, ['node-a', 'node-b'])
// One bucket per shard, so that the cold start needs one round of grants.
const SETTINGS = { total_shards: 4, max_concurrency: 4, lease_seconds: 30, identify_interval_ms: 5500, session_handoff: { allowed_hosts: ['127.0.0.1'], ttl_seconds: 60 } }

function node(e: GatewayEmulator, id: NodeIdentity, controller: string) {
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
    capacity: 4,
    ...FAST,
    identifyIntervalMs: SETTINGS.identify_interval_ms,
    onStart: (ctx) => shards.onStart(ctx),
    onStop: (ctx) => shards.onStop(ctx),
  })
  return { agent, shards, received }
}

t.test("a leaving adapter's shards are resumed by the other node: 0 IDENTIFY, every event exactly once", async (t) => {
  const e = await startGatewayEmulator({ shardCount: 4, maxConcurrency: 4, eventsPerSecond: 20, resumeWindowMs: 60_000 })
  const dir = join(root, 'leave')
  const ctl = await controllerIn(pki, dir, SETTINGS)
  const a = node(e, idA, urlOf(ctl.port))
  const b = node(e, idB, urlOf(ctl.port))
  t.teardown(async () => {
    await Promise.all([a.agent.stop(), b.agent.stop()])
    await ctl.running.stop()
    await e.stop()
  })
  await a.agent.start()
  await b.agent.start()
  await until('every shard READY, on both nodes', () => a.shards.shardIds.length > 0 && a.shards.shardIds.length + b.shards.shardIds.length === 4 && e.sessions({ state: 'live' }).length === 4, 45_000)
  await new Promise((r) => setTimeout(r, 300)) // some events on the first sessions
  const moved = a.shards.shardIds
  const identifiesBefore = e.stats.identifies.total

  const end = await a.agent.leave()
  t.equal(end.reason, 'shutdown')
  t.same(a.shards.shardIds, [], 'nothing runs on node-a')
  b.agent.checkInNow() // its next regular check-in would learn the same within lease/3
  await until('node-b runs every shard', () => b.shards.shardIds.length === 4, 30_000)
  await e.waitFor(() => e.sessions({ state: 'live' }).length === 4, { timeoutMs: 20_000, what: '4 live sessions' })
  await new Promise((r) => setTimeout(r, 500))
  e.pauseEvents()
  await new Promise((r) => setTimeout(r, 300))

  t.same(e.breaches, [], 'no breach of the gateway rules, no overlap')
  t.equal(e.stats.identifies.total - identifiesBefore, 0, '0 IDENTIFY for the moved shards')
  t.equal(e.resumes.filter((r) => r.outcome === 'resumed').length, moved.length, 'every moved shard RESUMEd')
  const report = e.checkDelivery([...a.received, ...b.received])
  t.ok(report.expected > 20, `${report.expected} test events produced`)
  t.same(report.lost, [], 'no event lost')
  t.same(report.duplicated, [], 'no event delivered twice')
  t.same(report.unknown, [])
  const lines = readFileSync(join(dir, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event: string; node_id?: string; shard_id?: number })
  t.ok(lines.some((l) => l.event === 'node_left' && l.node_id === 'node-a'), 'node_left audited')
  t.notOk(lines.some((l) => l.event === 'node_expired'), 'no lease ran out')
  t.same(lines.filter((l) => l.event === 'session_handed').map((l) => l.shard_id).sort(), [...moved].sort(), 'the controller handed every moved shard its session')
})
