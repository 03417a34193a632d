// The discord.js adapter through a live reshard (SPEC "Live resharding"): real NodeAgents running their
// shards on @discordjs/ws 2.0.4, a real controller over mTLS, and the gateway emulator enforcing Discord's
// rules. From 8 to 16 shards: the next set identifies beside the current one under its own shard count
// (a WebSocketManager per shard, shardCount 16), no bucket breach, no budget overrun, some session covers
// every guild at every moment (the guild-coverage check), the next set's events reach onDispatch only
// after the switch and the old set's not after it, and the switch comes within a lease of the last
// next-set shard running.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { REST } from '@discordjs/rest'
import type { NodeIdentity } from '../../src/agent/identity.js'
import { NodeAgent } from '../../src/agent/node-agent.js'
import { DiscordjsShards } from '../../src/discordjs/index.js'
import { bundle, makePki, request } from '../e2e/harness.js'
import { controllerIn, FAST, nodeIdentities, Recorder, until, urlOf } from '../agent/support.js'
import { startGatewayEmulator, type GatewayEmulator } from '../support/gateway/gateway-emulator.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const [idA, idB] = await nodeIdentities(pki, ['node-a', 'node-b'])
const op = await bundle(pki, 'ops', 'operator')
const LEASE_S = 9
const SETTINGS = { total_shards: 8, max_concurrency: 8, lease_seconds: LEASE_S, identify_interval_ms: 5500, daily_identify_limit: 100 }

/** One delivery to the bot: which shard count's session it came from, and when. */
interface Delivery {
  /** Wall-clock ms, to compare with the audit log's time of the switch. */
  readonly at: number
  readonly node: string
  readonly numShards: number
}

function node(e: GatewayEmulator, rec: Recorder, deliveries: Delivery[], id: NodeIdentity, controller: string): { agent: NodeAgent; shards: DiscordjsShards } {
  const name = id.nodeId
  const shards = new DiscordjsShards({
    token: e.token,
    intents: 0,
    wsOptions: { rest: new REST({ api: e.apiUrl }).setToken(e.token) },
    maxGrantAgeMs: 200,
    onDispatch: (_shardId, payload) => {
      const shard = (payload.d as { shard?: [number, number] } | null)?.shard
      if (Array.isArray(shard)) deliveries.push({ at: Date.now(), node: name, numShards: shard[1] })
    },
  })
  const agent = new NodeAgent({
    identity: id,
    controllers: [controller],
    capacity: 16,
    ...FAST,
    identifyIntervalMs: SETTINGS.identify_interval_ms,
    onStart: async (ctx) => {
      await shards.onStart(ctx)
      rec.shardEvents.push({ at: performance.now(), wall: Date.now(), node: name, shard: ctx.shardId, totalShards: ctx.totalShards, maxConcurrency: ctx.maxConcurrency, kind: 'start' })
    },
    onStop: async (ctx) => {
      rec.shardEvents.push({ at: performance.now(), wall: Date.now(), node: name, shard: ctx.shardId, totalShards: ctx.totalShards, maxConcurrency: ctx.maxConcurrency, kind: 'stop', reason: ctx.reason })
      return shards.onStop(ctx)
    },
  })
  return { agent, shards }
}

t.test('8 → 16 through the adapter: coverage, no breach, events from one set at a time, N grants', async (t) => {
  const e = await startGatewayEmulator({ shardCount: 8, maxConcurrency: 8, eventsPerSecond: 20, guildCount: 64, resumeWindowMs: 60_000 })
  const dir = join(root, 'reshard')
  const ctl = await controllerIn(pki, dir, SETTINGS)
  const rec = new Recorder()
  const deliveries: Delivery[] = []
  const a = node(e, rec, deliveries, idA, urlOf(ctl.port))
  const b = node(e, rec, deliveries, idB, urlOf(ctl.port))
  t.teardown(async () => {
    await Promise.all([a.agent.stop(), b.agent.stop()])
    await ctl.running.stop()
    await e.stop()
  })
  const plan = async () => (await request(ctl.port, pki.ca, op, '/v1/plan')).json
  await a.agent.start()
  await b.agent.start()
  await until('8 sessions live', () => e.sessions({ state: 'live', numShards: 8 }).length === 8 && rec.shardEvents.length === 8, 45_000)
  const covered = performance.now()

  const refused = await request(ctl.port, pki.ca, op, '/v1/reshard', { body: { total_shards: 12 } })
  t.equal(refused.status, 400, 'not a multiple of max_concurrency: refused')
  const posted = performance.now()
  t.equal((await request(ctl.port, pki.ca, op, '/v1/reshard', { body: { total_shards: 16 } })).status, 202)
  let switchedAt = 0
  for (let i = 0; i < 600 && switchedAt === 0; i++) {
    if ((await plan()).total_shards === 16) switchedAt = performance.now()
    else await new Promise((r) => setTimeout(r, 100))
  }
  t.ok(switchedAt > 0, 'the controller switched to 16 shards')
  await until('16 sessions of 16 live, none of 8', () => e.sessions({ state: 'live', numShards: 16 }).length === 16 && e.sessions({ state: 'live', numShards: 8 }).length === 0, 45_000)
  await new Promise((r) => setTimeout(r, 500))

  const unexpected = e.breaches.filter((x) => x.kind !== 'guild_overlap')
  t.same(unexpected, [], 'no bucket breach, no overlap of one shard, no session-start overrun')
  t.ok(e.breaches.some((x) => x.kind === 'guild_overlap'), 'the two sets did run side by side (guild overlaps Discord allows for resharding)')
  t.equal(rec.coverageGap(covered, 16), null, 'some session covered every guild at every moment')
  t.equal(e.stats.identifies.total, 24, '8 IDENTIFYs for the cold start, 16 for the next set, none at the switch')
  const starts16 = rec.shardEvents.filter((x) => x.kind === 'start' && x.totalShards === 16)
  t.equal(starts16.length, 16, 'each next-set shard started once: none restarted at the switch')
  const lastReady = Math.max(...starts16.map((x) => x.at))
  t.ok(switchedAt - lastReady < LEASE_S * 1000, `the switch came ${Math.round(switchedAt - lastReady)} ms after the last next-set shard was READY`)

  const auditLines = readFileSync(join(dir, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l))
  const switchWall = Date.parse(auditLines.find((l) => l.event === 'reshard_switched').time)
  const early16 = deliveries.filter((d) => d.numShards === 16 && d.at < switchWall)
  t.same(early16, [], 'no event of the next set reached the bot before the switch (the audited moment)')
  const late8 = deliveries.filter((d) => d.numShards === 8 && d.at > switchWall + LEASE_S * 1000)
  t.same(late8, [], 'no event of the old set reached the bot after the switch (once the nodes learned it)')
  t.ok(deliveries.some((d) => d.numShards === 16), 'the new set delivers after the switch')

  const grants = auditLines.filter((l) => l.event === 'identify_granted')
  const nextGrants = grants.filter((g) => g.set === 'next').length
  t.ok(nextGrants >= 16, `${nextGrants} next-set grants (a grant grown older than maxGrantAgeMs is claimed again)`)
  const budget = (await plan()).identify
  t.ok(budget.used_24h <= 100, `${budget.used_24h} grants within the daily budget of 100`)
  t.comment(`adapter reshard 8 → 16 on 2 nodes: ${Math.round(switchedAt - posted)} ms from POST /v1/reshard to the switch, ${nextGrants} next-set grants, ${e.stats.identifies.total - 8} IDENTIFYs`)
})
