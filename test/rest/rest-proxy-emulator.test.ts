// The REST proxy in front of the gateway emulator's REST side (Discord's rules: global 50/s, per-route
// buckets, invalid requests and the ban), with @discordjs/rest as the bot's client: within its share the
// proxy meets no global 429, two nodes sharing the budget meet none together, and a wrong token spends
// the invalid budget and no more.
import t, { type Test } from 'tap'
import { REST } from '@discordjs/rest'
import { startGatewayEmulator, type GatewayEmulator } from '../support/gateway/index.js'
import { startRestProxy, type RestProxy } from '../../src/rest/index.js'

async function emulator(t: Test): Promise<GatewayEmulator> {
  const e = await startGatewayEmulator({ eventsPerSecond: 0 })
  t.teardown(() => e.stop())
  return e
}

async function proxyOn(t: Test, e: GatewayEmulator): Promise<RestProxy> {
  const proxy = await startRestProxy({ upstream: e.apiUrl, maxHoldMs: 10_000 })
  t.teardown(() => proxy.close())
  return proxy
}

/** A bot's REST client pointed at the proxy, with its own global limit out of the way (it trusts the proxy). */
const botOn = (proxy: RestProxy, token: string) => new REST({ api: proxy.url, globalRequestsPerSecond: 10_000 }).setToken(token)

t.test('one node at 45/s: 150 GETs over 150 channels all served, no global 429, never more than 46 in a second', async (t) => {
  const e = await emulator(t)
  const proxy = await proxyOn(t, e)
  proxy.setShare({ perSecond: 45, invalidBudget: 100, validForMs: 60_000 })
  const ids = Array.from({ length: 150 }, (_, i) => String(5000 + i))
  const channels = (await Promise.all(ids.map((id) => botOn(proxy, e.token).get(`/channels/${id}`)))) as { id: string }[]
  t.same(channels.map((c) => c.id), ids)
  const stats = e.restStats
  t.equal(stats.global429, 0)
  t.equal(stats.route429, 0)
  t.ok(stats.maxInAnyWindow <= 46, `at most ${stats.maxInAnyWindow} in any second`)
})

t.test('two nodes at 22/s each, their bots firing at once: together no global 429', async (t) => {
  const e = await emulator(t)
  const [a, b] = [await proxyOn(t, e), await proxyOn(t, e)]
  for (const p of [a, b]) p.setShare({ perSecond: 22, invalidBudget: 100, validForMs: 60_000 })
  const fire = (p: RestProxy, base: number) => Promise.all(Array.from({ length: 90 }, (_, i) => botOn(p, e.token).get(`/channels/${base + i}`)))
  await Promise.all([fire(a, 7000), fire(b, 8000)])
  const stats = e.restStats
  t.equal(stats.byStatus[200], 180, 'every request served')
  t.equal(stats.global429, 0, 'no global 429')
  t.ok(stats.maxInAnyWindow <= 46, `at most ${stats.maxInAnyWindow} in any second`)
})

t.test('a wrong token: Discord meets the invalid budget (5), then the proxy answers 429 itself; no ban', async (t) => {
  const e = await emulator(t)
  const proxy = await proxyOn(t, e)
  proxy.setShare({ perSecond: 45, invalidBudget: 5, validForMs: 60_000 })
  const outcomes: string[] = []
  for (let i = 0; i < 8; i++) {
    // plain fetch: @discordjs/rest would wait out the proxy's 429 and try again, as it should
    const answer = await fetch(`${proxy.url}/v10/channels/${100 + i}`, { headers: { authorization: 'Bot not-the-token' } })
    outcomes.push(`${answer.status}${answer.headers.get('x-pxe-rest-proxy') === null ? '' : ` ${answer.headers.get('x-pxe-rest-proxy')}`}`)
  }
  t.same(outcomes, ['401', '401', '401', '401', '401', '429 invalid_budget', '429 invalid_budget', '429 invalid_budget'])
  t.same(e.restStats.invalidByClient, { '127.0.0.1': 5 }, 'Discord counted 5 invalid requests')
  t.same(e.restStats.bans, [])
  t.equal(proxy.demand(60_000).invalid10m, 5)
})
