// The emulator's REST side spoken to with bare fetch: every answer's status, body and headers as
// Discord documents them (developers/topics/rate-limits.mdx), what counts as invalid, and the ban.
import t, { type Test } from 'tap'
import { BAN_BODY, startGatewayEmulator, type GatewayEmulator, type GatewayEmulatorOptions } from '../support/gateway/index.js'

async function emulator(t: Test, options: GatewayEmulatorOptions = {}): Promise<GatewayEmulator> {
  const e = await startGatewayEmulator({ eventsPerSecond: 0, ...options })
  t.teardown(() => e.stop())
  return e
}

interface Call {
  readonly method?: string
  readonly token?: string | null
  readonly client?: string
  readonly body?: string
}

async function call(e: GatewayEmulator, path: string, c: Call = {}): Promise<{ status: number; body: unknown; headers: Headers }> {
  const headers: Record<string, string> = {}
  const token = c.token === undefined ? e.token : c.token
  if (token !== null) headers.authorization = `Bot ${token}`
  if (c.client) headers['x-emulator-client'] = c.client
  if (c.body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(`${e.apiUrl}/v10${path}`, { method: c.method ?? 'GET', headers, ...(c.body === undefined ? {} : { body: c.body }) })
  return { status: res.status, body: await res.json(), headers: res.headers }
}

const rateLimitHeaders = (h: Headers) => [...h.keys()].filter((k) => k.startsWith('x-ratelimit') || k === 'retry-after')

t.test('200 answers carry the bucket headers: limit, remaining, reset (epoch s), reset-after (s), bucket per route', async (t) => {
  const e = await emulator(t)
  const before = Date.now() / 1000
  const me = await call(e, '/users/@me')
  t.equal(me.status, 200)
  t.match(me.body, { id: /^\d+$/, bot: true })
  t.equal(me.headers.get('x-ratelimit-limit'), '5')
  t.equal(me.headers.get('x-ratelimit-remaining'), '4')
  const resetAfter = Number(me.headers.get('x-ratelimit-reset-after'))
  t.ok(resetAfter > 0 && resetAfter <= 1, `reset-after ${resetAfter} s`)
  const reset = Number(me.headers.get('x-ratelimit-reset'))
  t.ok(reset > before && reset <= Date.now() / 1000 + 1.01, 'reset is an epoch time in seconds about a second ahead')
  t.match(me.headers.get('x-ratelimit-bucket'), /^[0-9a-f]{32}$/)
  t.notOk(me.headers.has('x-ratelimit-scope'), 'scope is sent on 429s only')
  const one = await call(e, '/channels/1')
  const two = await call(e, '/channels/2')
  const messages = await call(e, '/channels/1/messages')
  t.same(one.body, { id: '1', type: 0, name: 'channel-1' })
  t.equal(one.headers.get('x-ratelimit-bucket'), two.headers.get('x-ratelimit-bucket'), 'the bucket hash excludes the major parameter')
  t.equal(two.headers.get('x-ratelimit-remaining'), '4', 'but its state is kept per channel')
  t.not(messages.headers.get('x-ratelimit-bucket'), one.headers.get('x-ratelimit-bucket'))
  t.same((await call(e, '/guilds/9')).body, { id: '9', name: 'guild-9' })
  t.equal((await call(e, '/webhooks/7')).status, 200)
  t.same(e.restStats.byOutcome, { ok: 6 })
})

t.test('401 without the bot token: Discord\'s body, counted invalid, the global window untouched', async (t) => {
  const e = await emulator(t, { rest: { globalPerSecond: 2 } })
  for (const c of [{ token: null }, { token: 'wrong' }, { token: `${e.token}x` }] satisfies Call[]) {
    const res = await call(e, '/users/@me', c)
    t.equal(res.status, 401)
    t.same(res.body, { message: '401: Unauthorized', code: 0 })
    t.same(rateLimitHeaders(res.headers), [])
  }
  const raw = await fetch(`${e.apiUrl}/v10/users/@me`, { headers: { authorization: e.token } })
  t.equal(raw.status, 401, 'a token without "Bot "')
  t.equal((await call(e, '/channels/1')).status, 200)
  t.equal((await call(e, '/channels/2')).status, 200, 'the 401s did not spend the global limit of 2')
  const stats = e.restStats
  t.same(stats.invalidByClient, { '127.0.0.1': 4 })
  t.same(stats.byOutcome, { unauthorized: 4, ok: 2 })
  t.same(e.restRequests.filter((r) => r.invalid).map((r) => r.outcome), ['unauthorized', 'unauthorized', 'unauthorized', 'unauthorized'])
})

t.test('404 for unknown routes and 405 for a wrong method: not invalid', async (t) => {
  const e = await emulator(t)
  for (const path of ['/channels/1/pins', '/channels/abc', '/nope']) {
    const res = await call(e, path)
    t.equal(res.status, 404, path)
    t.same(res.body, { message: '404: Not Found', code: 0 })
  }
  t.same((await call(e, '/channels/1', { method: 'DELETE' })).body, { message: '405: Method Not Allowed', code: 0 })
  t.same(e.restStats.invalidByClient, {})
  t.equal(e.restStats.byStatus[404], 3)
})

t.test('a route bucket\'s 429: global false, scope user, Retry-After; counted invalid; other channels unaffected', async (t) => {
  const e = await emulator(t)
  for (let i = 0; i < 5; i++) t.equal((await call(e, '/channels/1')).status, 200)
  const limited = await call(e, '/channels/1')
  t.equal(limited.status, 429)
  const body = limited.body as { message: string; retry_after: number; global: boolean }
  t.equal(body.message, 'You are being rate limited.')
  t.equal(body.global, false)
  t.ok(body.retry_after > 0 && body.retry_after <= 1, `retry_after ${body.retry_after}`)
  t.equal(limited.headers.get('retry-after'), '1', 'whole seconds, rounded up')
  t.equal(limited.headers.get('x-ratelimit-scope'), 'user')
  t.equal(limited.headers.get('x-ratelimit-remaining'), '0')
  t.notOk(limited.headers.has('x-ratelimit-global'))
  t.equal((await call(e, '/channels/2')).status, 200)
  t.equal(e.restStats.route429, 1)
  t.equal(e.restStats.global429, 0)
  t.same(e.restStats.invalidByClient, { '127.0.0.1': 1 })
})

t.test('the global limit: 50 pass at once, the 51st is a 429 global: true with its headers; it passes after retry_after', async (t) => {
  const e = await emulator(t)
  const first = await Promise.all(Array.from({ length: 50 }, (_, i) => call(e, `/channels/${100 + i}`)))
  t.same(first.map((r) => r.status), Array(50).fill(200))
  const over = await call(e, '/channels/999')
  t.equal(over.status, 429)
  t.same(Object.keys(over.body as object).sort(), ['global', 'message', 'retry_after'])
  const body = over.body as { message: string; retry_after: number; global: boolean }
  t.match(body, { message: 'You are being rate limited.', global: true })
  t.ok(body.retry_after > 0 && body.retry_after <= 1, `retry_after ${body.retry_after}`)
  t.equal(over.headers.get('retry-after'), '1')
  t.equal(over.headers.get('x-ratelimit-global'), 'true')
  t.equal(over.headers.get('x-ratelimit-scope'), 'global')
  t.notOk(over.headers.has('x-ratelimit-bucket'), 'refused before the route: no bucket spent')
  await new Promise((resolve) => setTimeout(resolve, body.retry_after * 1000 + 5))
  t.equal((await call(e, '/channels/999')).status, 200)
  const stats = e.restStats
  t.equal(stats.global429, 1)
  t.equal(stats.maxAdmittedInAnyWindow, 50)
  t.equal(stats.maxInAnyWindow, 51)
  t.equal(stats.perSecond.reduce((a, b) => a + b, 0), 52)
  t.equal(stats.okPerSecond.reduce((a, b) => a + b, 0), 51)
})

t.test('Create Message: an echo with an ID; bodies Discord refuses are 400 (not invalid), a huge one 413', async (t) => {
  const e = await emulator(t)
  const ok = await call(e, '/channels/5/messages', { method: 'POST', body: JSON.stringify({ content: 'hello', nonce: 'n1' }) })
  t.equal(ok.status, 200)
  t.match(ok.body, { id: /^\d{17,20}$/, channel_id: '5', content: 'hello', author: { bot: true } })
  t.equal(ok.headers.get('x-ratelimit-limit'), '5')
  t.ok(Number(ok.headers.get('x-ratelimit-reset-after')) > 1, 'a 5 s window')
  const bad: Array<[string, string, number, number]> = [
    ['fail/not JSON', '{"content":', 400, 50109],
    ['fail/unknown field', JSON.stringify({ content: 'x', colour: 1 }), 400, 50035],
    ['fail/content too long', JSON.stringify({ content: 'x'.repeat(2001) }), 400, 50035],
    ['fail/empty', JSON.stringify({ content: '' }), 400, 50006],
    ['fail/not an object', '[]', 400, 50035],
    ['fail/over 64 KiB', JSON.stringify({ content: 'x'.repeat(70_000) }), 413, 40005],
  ]
  // One channel each: a refused body still spends its channel's bucket (5 per 5 s), as the limits come first.
  for (const [i, [name, body, status, code]] of bad.entries()) {
    const res = await call(e, `/channels/${10 + i}/messages`, { method: 'POST', body })
    t.equal(res.status, status, name)
    t.match(res.body, { code }, name)
  }
  t.same(e.restStats.invalidByClient, {}, '400 and 413 are not invalid requests')
  t.equal(e.restStats.byOutcome.ok, 1)
})

t.test('a channel in forbiddenChannelIds answers 403 Missing Access, counted invalid', async (t) => {
  const e = await emulator(t, { rest: { forbiddenChannelIds: ['66'] } })
  const res = await call(e, '/channels/66/messages')
  t.equal(res.status, 403)
  t.same(res.body, { message: 'Missing Access', code: 50001 })
  t.equal((await call(e, '/channels/67/messages')).status, 200)
  t.same(e.restStats.invalidByClient, { '127.0.0.1': 1 })
})

t.test('a channel in sharedLimitedChannelIds answers 429 scope shared, with its bucket headers; not invalid', async (t) => {
  const e = await emulator(t, { rest: { sharedLimitedChannelIds: ['77'] } })
  const res = await call(e, '/channels/77')
  t.equal(res.status, 429)
  t.same(res.body, { message: 'The resource is being rate limited.', retry_after: 1, global: false })
  t.equal(res.headers.get('x-ratelimit-scope'), 'shared')
  t.equal(res.headers.get('retry-after'), '1')
  t.equal(res.headers.get('x-ratelimit-remaining'), '4', 'the bucket itself has room')
  t.same(e.restStats.invalidByClient, {})
  t.equal(e.restStats.shared429, 1)
  t.equal(e.restStats.route429, 0)
  t.same(e.restRequests.map((r) => [r.outcome, r.invalid]), [['shared_limited', false]])
})

t.test('the ban: the limit-th invalid request in the window bans its client; the ban\'s answer; other clients unaffected; it ends', async (t) => {
  const e = await emulator(t, { rest: { invalidLimit: 5, invalidWindowMs: 10_000, banMs: 500 } })
  for (let i = 0; i < 4; i++) t.equal((await call(e, '/users/@me', { token: 'wrong', client: 'bot-a' })).status, 401)
  t.same(e.restStats.bannedClients, [])
  t.equal((await call(e, '/users/@me', { token: 'wrong', client: 'bot-a' })).status, 401, 'the 5th is answered, and bans')
  t.same(e.restStats.bannedClients, ['bot-a'])
  const refused = await call(e, '/users/@me', { client: 'bot-a' })
  t.equal(refused.status, 429, 'refused even with the right token')
  t.same(refused.body, BAN_BODY)
  t.same(rateLimitHeaders(refused.headers), [], 'no Retry-After, no rate-limit headers')
  t.equal((await call(e, '/nope', { client: 'bot-a' })).status, 429, 'every path, known or not')
  t.equal((await call(e, '/users/@me', { client: 'bot-b' })).status, 200, 'another client')
  t.equal((await call(e, '/users/@me')).status, 200, 'the IP address itself (no client header) is another client')
  const ban = e.restStats.bans[0]
  t.match(ban, { client: 'bot-a' })
  t.equal((ban?.until ?? 0) - (ban?.at ?? 0), 500)
  await e.waitFor(() => e.restNow() >= (ban?.until ?? 0), { what: 'the ban to end' })
  t.equal((await call(e, '/users/@me', { client: 'bot-a' })).status, 200, 'unbanned')
  const stats = e.restStats
  t.same(stats.bannedClients, [])
  t.equal(stats.bannedRefusals, 2)
  t.same(stats.invalidByClient, { 'bot-a': 5 }, "a ban's refusals are not counted as invalid")
  t.same(stats.invalidInWindowByClient, {}, 'the ban cleared the count')
  t.equal(stats.perSecond.reduce((a, b) => a + b, 0), stats.requests - 2, 'refusals never reached the API')
})

t.test('clientHeader: null counts by IP address only; another header name can be chosen', async (t) => {
  const byIp = await emulator(t, { rest: { clientHeader: null } })
  await call(byIp, '/users/@me', { token: 'wrong', client: 'bot-a' })
  t.same(byIp.restStats.invalidByClient, { '127.0.0.1': 1 })
  const named = await emulator(t, { rest: { clientHeader: 'X-Node' } })
  await fetch(`${named.apiUrl}/v10/users/@me`, { headers: { 'x-node': 'node-1' } })
  await call(named, '/users/@me', { token: 'wrong', client: 'ignored' })
  t.same(named.restStats.invalidByClient, { 'node-1': 1, '127.0.0.1': 1 })
})

t.test('bad REST options refuse to start the emulator', async (t) => {
  await t.rejects(startGatewayEmulator({ rest: { globalPerSecond: 0 } }), { name: 'RangeError', message: /rest\.globalPerSecond/ })
  await t.rejects(startGatewayEmulator({ rest: { banMs: -5 } }), { name: 'RangeError', message: /rest\.banMs/ })
})
