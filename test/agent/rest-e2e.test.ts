// The REST budget end to end: a real controller with "rest" (over mTLS), two agents each with its REST
// proxy, and the gateway emulator's REST side behind them. A hungry bot (many requests at once) and a
// light one share Discord's global limit through their shares: no global 429, the shares in force never
// sum above the safe budget, the controller sees both demands; a leaving node's proxy stops at once.
import t from 'tap'
import { REST } from '@discordjs/rest'
import { startGatewayEmulator } from '../support/gateway/index.js'
import { startRestProxy, type RestProxy } from '../../src/rest/index.js'
import { bundle, makePki, request } from '../e2e/harness.js'
import { Recorder, controllerIn, nodeIdentities, recordingAgent, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'
import { join } from 'node:path'

const root = testDir(t)
const pki = await makePki(root)
const [idA, idB] = await nodeIdentities(pki, ['node-a', 'node-b'])
const op = await bundle(pki, 'ops', 'operator')

t.test('a hungry and a light node share the global limit: no global 429, shares within the safe budget', async (t) => {
  const ctl = await controllerIn(pki, join(root, 'ctl'), { total_shards: 4, max_concurrency: 1, lease_seconds: 6, rest: { global_per_second: 50, safety: 0.9, invalid_per_10_minutes: 10_000 } })
  t.teardown(() => ctl.running.stop())
  const e = await startGatewayEmulator({ eventsPerSecond: 0 })
  t.teardown(() => e.stop())
  const proxies: RestProxy[] = []
  for (let i = 0; i < 2; i++) proxies.push(await startRestProxy({ upstream: e.apiUrl }))
  t.teardown(() => Promise.all(proxies.map((p) => p.close())))
  const [pa, pb] = proxies as [RestProxy, RestProxy]
  const rec = new Recorder()
  const a = recordingAgent(rec, idA, [urlOf(ctl.port)], { restProxy: pa })
  const b = recordingAgent(rec, idB, [urlOf(ctl.port)], { restProxy: pb })
  t.teardown(() => Promise.all([a.stop(), b.stop()]))
  await a.start()
  await b.start()

  // Each bot's REST client trusts its proxy (its own global limit out of the way); every GET its own channel.
  let next = 10_000
  let running = true
  const served = { a: 0, b: 0 }
  const worker = async (proxy: RestProxy, who: 'a' | 'b', pauseMs: number) => {
    const rest = new REST({ api: proxy.url, globalRequestsPerSecond: 10_000 }).setToken(e.token)
    while (running) {
      await rest.get(`/channels/${next++}`).then(() => void (served[who] += 1), () => {})
      if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs))
    }
  }
  const sharesInForce: number[] = []
  const hist: string[] = []
  const h = setInterval(() => hist.push(`${pa.share()?.perSecond ?? 0}/${pb.share()?.perSecond ?? 0}`), 1000)
  const sampler = setInterval(() => sharesInForce.push((pa.share()?.perSecond ?? 0) + (pb.share()?.perSecond ?? 0)), 50)
  const workers = [...Array.from({ length: 30 }, () => worker(pa, 'a', 0)), worker(pb, 'b', 200)]
  await until('both shares in force and both demands at the controller', () => pa.share() !== null && pb.share() !== null && (pb.share()?.perSecond ?? 0) > 0, 20_000)
  await new Promise((r) => setTimeout(r, 10_000))
  const view = (await request(ctl.port, pki.ca, op, '/v1/plan')).json as { nodes: { node_id: string; rest?: { per_second: number; demand?: { per_second: number } } }[] }
  running = false
  clearInterval(sampler)
  await Promise.all(workers)

  const stats = e.restStats
  t.equal(stats.global429, 0, 'no global 429 from Discord')
  t.ok(stats.maxInAnyWindow <= 50, `at most ${stats.maxInAnyWindow} requests in any second`)
  t.ok(Math.max(...sharesInForce) <= 45 + 1e-9, `the shares in force never summed above 45/s (max ${Math.max(...sharesInForce)})`)
  t.ok(served.a > served.b && served.b > 0, `served: hungry ${served.a}, light ${served.b}`)
  const restOf = (id: string) => view.nodes.find((n) => n.node_id === id)?.rest
  t.ok((restOf('node-a')?.demand?.per_second ?? 0) > (restOf('node-b')?.demand?.per_second ?? 0), `demands at the controller: ${restOf('node-a')?.demand?.per_second}/s and ${restOf('node-b')?.demand?.per_second}/s`)
  t.ok((restOf('node-a')?.per_second ?? 0) > 3 * (restOf('node-b')?.per_second ?? 0), `shares: ${restOf('node-a')?.per_second} and ${restOf('node-b')?.per_second}`)
  // a bot that waits for each answer shows more demand than it is served only through the requests still held
  t.ok((restOf('node-a')?.per_second ?? 0) > 10, "the hungry node's share grew from the floor with the requests it held")
  clearInterval(h)
  t.comment(`shares each second (hungry/light): ${hist.join(' ')}`)
  t.comment(`hungry ${served.a}, light ${served.b} in about 10 s; emulator: ${stats.requests} requests, max ${stats.maxInAnyWindow} in a second, ${stats.global429} global 429`)

  const leaving = a.leave()
  t.equal(pa.share(), null, "the leaving node's proxy stops at once")
  await leaving
})
