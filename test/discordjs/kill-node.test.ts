// A node killed with SIGKILL (the example bot, examples/discordjs-bot.ts, as a child process): it releases
// nothing and deposits nothing, so the survivor takes its shards only after the lease and IDENTIFIES them
// under the bucket rule. The gateway emulator sees no bucket breach and never two live sessions on a shard.
import t from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { REST } from '@discordjs/rest'
import { NodeAgent } from '../../src/agent/node-agent.js'
import { DiscordjsShards } from '../../src/discordjs/index.js'
import { bundle, makePki } from '../e2e/harness.js'
import { controllerIn, FAST, nodeIdentities, until, urlOf } from '../agent/support.js'
import { startGatewayEmulator } from '../support/gateway/gateway-emulator.js'
import { testDir } from '../support/test-dir.js'

const BOT = fileURLToPath(new URL('../../dist/examples/discordjs-bot.js', import.meta.url))
if (!existsSync(BOT)) throw new Error('dist/ is missing: run "npm run build" (npm test does it first)')

const root = testDir(t)
const pki = await makePki(root)
const [idA] = await nodeIdentities(pki, ['node-a'])
await bundle(pki, 'node-b', 'node')
const LEASE_S = 9
const SETTINGS = { total_shards: 8, max_concurrency: 4, lease_seconds: LEASE_S, identify_interval_ms: 5500 }

t.test('kill -9 of a node: the survivor identifies its shards after the lease, under the bucket rule, with no overlap', async (t) => {
  const e = await startGatewayEmulator({ shardCount: 8, maxConcurrency: 4, eventsPerSecond: 5 })
  const ctl = await controllerIn(pki, join(root, 'kill'), SETTINGS)
  const tokenFile = join(root, 'token')
  writeFileSync(tokenFile, `${e.token}\n`, { mode: 0o600 })
  let child: ReturnType<typeof spawn> | null = null
  let childExit: number | string | null = null
  const shards = new DiscordjsShards({ token: e.token, intents: 0, wsOptions: { rest: new REST({ api: e.apiUrl }).setToken(e.token) }, onDispatch: () => undefined })
  const agent = new NodeAgent({ identity: idA, controllers: [urlOf(ctl.port)], capacity: 8, ...FAST, identifyIntervalMs: 5500, onStart: (c) => shards.onStart(c), onStop: (c) => shards.onStop(c) })
  t.teardown(async () => {
    if (child !== null && childExit === null) child.kill('SIGKILL')
    await agent.stop()
    await ctl.running.stop()
    await e.stop()
  })
  await agent.start()
  await until('node-a runs 8 shards alone', () => shards.shardIds.length === 8, 45_000)
  // node-b joins with capacity 8: it takes half of the shards from node-a
  child = spawn(process.execPath, [BOT, '--bundle', join(pki.dir, 'bundles', 'node-b'), '--controller', urlOf(ctl.port), '--token-file', tokenFile, '--capacity', '8', '--discord-api', e.apiUrl], { stdio: ['ignore', 'ignore', 'inherit'] })
  child.once('exit', (code, signal) => (childExit = code ?? signal))
  await until('the bot child runs 4 shards, node-a 4', () => shards.shardIds.length === 4 && e.sessions({ state: 'live' }).length === 8, 45_000)
  const childShards = [0, 1, 2, 3, 4, 5, 6, 7].filter((s) => !shards.shardIds.includes(s))
  t.equal(childShards.length, 4, 'the child holds four shards')
  const identifiesBefore = e.stats.sessionsStarted.total
  const startedBefore = { ...e.stats.sessionsStarted.byShard }
  const killedAt = Date.now()
  child.kill('SIGKILL')
  await until('the child is gone', () => childExit !== null)
  await until('node-a runs all 8 again', () => shards.shardIds.length === 8 && e.sessions({ state: 'live' }).length === 8, 60_000)
  const startedAfter = e.stats.sessionsStarted.byShard
  // the controller's word: node-b expired (its lease ran out), and only then were its shards granted to node-a
  const audit = readFileSync(join(root, 'kill', 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event: string; time: string; node_id?: string; shard_id?: number; last_seen?: string })
  const expired = audit.find((l) => l.event === 'node_expired' && l.node_id === 'node-b')
  t.ok(expired, 'node-b expired')
  const grants = audit.filter((l) => l.event === 'identify_granted' && l.node_id === 'node-a' && childShards.includes(l.shard_id!) && l.time >= expired!.time)
  // Each at least once (a grant grown older than maxGrantAgeMs before its IDENTIFY, on a loaded box, is claimed again).
  t.same([...new Set(grants.map((g) => g.shard_id!))].sort((x, y) => x - y), childShards, "node-a was granted each of node-b's shards after node-b expired")
  t.ok(Date.parse(expired!.time) - Date.parse(expired!.last_seen!) > LEASE_S * 1000, 'a whole lease after its last check-in')
  t.ok(Date.now() - killedAt < 3 * LEASE_S * 1000, 'and within a few leases of the kill')
  t.equal(e.stats.sessionsStarted.total - identifiesBefore, 4, "node-a IDENTIFIED each of the dead node's shards once (nothing was deposited)")
  t.same(childShards.map((s) => (startedAfter[s] ?? 0) - (startedBefore[s] ?? 0)), [1, 1, 1, 1], 'one new session on each shard the child held')
  t.same(e.breaches, [], 'no bucket breach, no overlap')
})
