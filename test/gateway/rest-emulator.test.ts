// The emulator's REST rules proven against @discordjs/rest itself, the client the product's proxy
// leans on: it reads the bucket headers and never meets a route 429; beyond the global limit it meets
// 429 global: true and honours Retry-After until every request is served; a wrong token is a 401
// counted invalid; enough of them ban its client, which is served again once the ban has ended.
import { DiscordAPIError, REST, RESTEvents } from '@discordjs/rest'
import t, { type Test } from 'tap'
import { startGatewayEmulator, type GatewayEmulator, type GatewayEmulatorOptions } from '../support/gateway/index.js'

async function emulator(t: Test, options: GatewayEmulatorOptions = {}): Promise<GatewayEmulator> {
  const e = await startGatewayEmulator({ eventsPerSecond: 0, ...options })
  t.teardown(() => e.stop())
  return e
}

/** A REST on the emulator that records the status of every answer it received. */
function restOn(e: GatewayEmulator, options: { token?: string; client?: string; globalRequestsPerSecond?: number } = {}) {
  const rest = new REST({
    api: e.apiUrl,
    ...(options.globalRequestsPerSecond ? { globalRequestsPerSecond: options.globalRequestsPerSecond } : {}),
    ...(options.client ? { headers: { 'x-emulator-client': options.client } } : {}),
  }).setToken(options.token ?? e.token)
  const statuses: number[] = []
  rest.on(RESTEvents.Response, (_request, response) => void statuses.push(response.status))
  return { rest, statuses }
}

const count = (xs: readonly number[], x: number) => xs.filter((y) => y === x).length

t.test('20 messages to one channel through one REST: no route 429; the emulator served them 5 per 5 s', async (t) => {
  const e = await emulator(t)
  const { rest, statuses } = restOn(e)
  const sent = await Promise.all(Array.from({ length: 20 }, (_, i) => rest.post('/channels/42/messages', { body: { content: `message ${i}` } })))
  t.same(sent.map((m) => (m as { content: string }).content), Array.from({ length: 20 }, (_, i) => `message ${i}`))
  t.same(statuses, Array(20).fill(200), 'the client saw 20 answers, every one 200')
  t.equal(e.restStats.route429, 0)
  t.equal(e.restStats.global429, 0)
  const posts = e.restRequests.filter((r) => r.route === 'create_message').map((r) => r.at)
  t.equal(posts.length, 20)
  // Four windows of five: the 16th can only have been served once three 5 s windows had ended.
  t.ok((posts[19] ?? 0) - (posts[0] ?? 0) >= 15_000, `first to last: ${Math.round((posts[19] ?? 0) - (posts[0] ?? 0))} ms`)
})

t.test('150 GETs over 150 channels from a REST allowed 200/s: global 429s, recorded and honoured; every GET served', async (t) => {
  const e = await emulator(t)
  const { rest, statuses } = restOn(e, { globalRequestsPerSecond: 200 })
  const ids = Array.from({ length: 150 }, (_, i) => String(1000 + i))
  const channels = (await Promise.all(ids.map((id) => rest.get(`/channels/${id}`)))) as Array<{ id: string }>
  t.same(channels.map((c) => c.id), ids, 'every GET completed with its channel')
  const stats = e.restStats
  t.ok(stats.global429 >= 100, `${stats.global429} global 429s (150 fired at once, 50 admitted per second)`)
  t.equal(count(statuses, 429), stats.global429, 'the client met every 429 the emulator recorded')
  t.equal(stats.route429, 0, 'one GET per channel: no bucket was exceeded')
  t.equal(stats.maxAdmittedInAnyWindow, 50, 'never more than 50 admitted in any second')
  t.equal(count(statuses, 200), 150)
  const served = e.restRequests.filter((r) => r.status === 200).map((r) => r.majorId)
  t.equal(new Set(served).size, 150, 'each channel served exactly once')
  t.ok(stats.okPerSecond.length >= 3, `served over ${stats.okPerSecond.length} seconds: ${stats.okPerSecond.join(', ')}`)
  t.same(stats.invalidByClient, { '127.0.0.1': stats.global429 }, 'each global 429 is an invalid request of its client')
})

t.test('a wrong token: DiscordAPIError 401, counted invalid; the client sends nothing more', async (t) => {
  const e = await emulator(t)
  const { rest, statuses } = restOn(e, { token: 'not-the-token' })
  const error = await rest.get('/users/@me').catch((err: unknown) => err)
  t.type(error, DiscordAPIError)
  t.equal((error as DiscordAPIError).status, 401)
  await t.rejects(rest.get('/users/@me'), /Expected token to be set/)
  t.same(statuses, [401])
  t.equal(e.restStats.requests, 1)
  t.same(e.restStats.invalidByClient, { '127.0.0.1': 1 })
})

t.test('a ban (scaled down: 20 invalid in 10 s, 1 s ban): a client with a wrong token is banned, then served after the ban', async (t) => {
  const e = await emulator(t, { rest: { invalidLimit: 20, invalidWindowMs: 10_000, banMs: 1000 } })
  const wrong = restOn(e, { token: 'not-the-token', client: 'bot-a' })
  // After a 401 @discordjs/rest drops its token and sends nothing more ("stopping further requests after a
  // token becomes invalid", as Discord asks): each attempt sets it again, as a misconfigured bot restarting would.
  for (let i = 0; i < 20; i++) {
    const error = await wrong.rest.setToken('not-the-token').get('/users/@me').catch((err: unknown) => err)
    t.equal(error instanceof DiscordAPIError && error.status, 401)
  }
  await t.rejects(wrong.rest.get('/users/@me'), /Expected token to be set/, 'without setToken it sends nothing')
  t.equal(wrong.statuses.length, 20)
  t.same(e.restStats.bannedClients, ['bot-a'])
  const ban = e.restStats.bans[0]
  if (!ban) throw new Error('no ban recorded')
  // The same client with the right token: @discordjs/rest retries a 429 that has no Retry-After at
  // once, so it loops against the ban until it ends, and then succeeds.
  const right = restOn(e, { client: 'bot-a' })
  const other = restOn(e, { client: 'bot-b' })
  const banned = right.rest.get('/users/@me')
  t.match(await other.rest.get('/users/@me'), { bot: true }, 'another client is served during the ban')
  t.match(await banned, { bot: true }, 'served once the ban ended')
  const lastRefusal = e.restRequests.filter((r) => r.outcome === 'banned').at(-1)
  const served = e.restRequests.filter((r) => r.client === 'bot-a' && r.status === 200)
  t.ok(lastRefusal && lastRefusal.at < ban.until, 'refused only during the ban')
  t.equal(served.length, 1)
  t.ok((served[0]?.at ?? 0) >= ban.until, 'served after the ban')
  const stats = e.restStats
  t.ok(stats.bannedRefusals >= 1, `${stats.bannedRefusals} refusals while banned (the client retried at once each time)`)
  t.equal(count(right.statuses, 429), stats.bannedRefusals)
  t.same(stats.invalidByClient, { 'bot-a': 20 }, 'the refusals are not counted again')
  t.same(stats.bannedClients, [])
})

t.test('the sliding window: 50 requests in a second pass, the 51st in the same second is a global 429', async (t) => {
  const e = await emulator(t)
  const get = (id: number) => fetch(`${e.apiUrl}/v10/channels/${id}`, { headers: { authorization: `Bot ${e.token}` } })
  const half = await Promise.all(Array.from({ length: 25 }, (_, i) => get(i)))
  await new Promise((resolve) => setTimeout(resolve, 600))
  const rest = await Promise.all(Array.from({ length: 25 }, (_, i) => get(100 + i)))
  t.same([...half, ...rest].map((r) => r.status), Array(50).fill(200), '50 in about 600 ms pass')
  const over = await get(999)
  t.equal(over.status, 429)
  t.match(await over.json(), { global: true })
  // 1.1 s after the first 25: a window aligned on whole seconds would have room for 50 again; the
  // sliding one still holds the 25 sent at 600 ms.
  const firstAt = e.restRequests[0]?.at ?? 0
  await e.waitFor(() => e.restNow() >= firstAt + 1100, { what: '1.1 s after the first request' })
  const later = await Promise.all(Array.from({ length: 26 }, (_, i) => get(200 + i)))
  const statuses = later.map((r) => r.status)
  t.equal(count(statuses, 200), 25, 'room for the 25 that left the window')
  t.equal(count(statuses, 429), 1)
  t.equal(e.restStats.maxAdmittedInAnyWindow, 50)
  t.equal(e.restStats.global429, 2)
})
