// A start's grant pays for its first IDENTIFY only while it is fresh (maxGrantAgeMs): here 0 ms, so
// every first IDENTIFY claims a fresh grant first. The controller then grants twice per shard, the
// gateway still sees one IDENTIFY per shard and no bucket breach.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { REST } from '@discordjs/rest'
import { NodeAgent } from '../../src/agent/node-agent.js'
import { DiscordjsShards } from '../../src/discordjs/index.js'
import { makePki } from '../e2e/harness.js'
import { controllerIn, FAST, nodeIdentities, until, urlOf } from '../agent/support.js'
import { startGatewayEmulator } from '../support/gateway/gateway-emulator.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const [idA] = await nodeIdentities(pki, ['node-a'])

t.test('a stale start grant is not spent on an IDENTIFY: a fresh one is claimed first', async (t) => {
  const e = await startGatewayEmulator({ shardCount: 2, maxConcurrency: 2, eventsPerSecond: 0 })
  const dir = join(root, 'stale')
  const ctl = await controllerIn(pki, dir, { total_shards: 2, max_concurrency: 2, lease_seconds: 9, identify_interval_ms: 5000 })
  const shards = new DiscordjsShards({ token: e.token, intents: 0, wsOptions: { rest: new REST({ api: e.apiUrl }).setToken(e.token) }, onDispatch: () => undefined, maxGrantAgeMs: 0 })
  const agent = new NodeAgent({ identity: idA, controllers: [urlOf(ctl.port)], capacity: 2, ...FAST, identifyIntervalMs: 5000, onStart: (c) => shards.onStart(c), onStop: (c) => shards.onStop(c) })
  t.teardown(async () => {
    await agent.stop()
    await ctl.running.stop()
    await e.stop()
  })
  await agent.start()
  await until('both shards READY', () => e.sessions({ state: 'live' }).length === 2, 30_000)
  const grants = readFileSync(join(dir, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event: string; shard_id?: number }).filter((l) => l.event === 'identify_granted')
  t.same(grants.map((g) => g.shard_id).sort(), [0, 0, 1, 1], 'two grants per shard: the stale start grant and the fresh one')
  t.equal(e.stats.identifies.total, 2, 'one IDENTIFY per shard')
  t.same(e.breaches, [], 'no bucket breach: the IDENTIFY went out under the fresh grant')
  t.throws(() => new DiscordjsShards({ token: 'x', intents: 0, wsOptions: e as never, onDispatch: () => undefined, maxGrantAgeMs: -1 }), /maxGrantAgeMs must be a non-negative integer/)
})
