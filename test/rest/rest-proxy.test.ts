// The REST proxy end to end on 127.0.0.1, in front of a tiny stand-in for Discord's API: what it
// forwards and answers, that it sends nothing without a share and nothing beyond it (also to a bot that
// ignores its 429s), the invalid budget, the bad requests it refuses itself, and that the token is
// never logged.
import t, { type Test } from 'tap'
import { REST } from '@discordjs/rest'
import { Registry } from 'prom-client'
import { startRestProxy, type RestProxy, type RestProxyOptions } from '../../src/rest/index.js'
import { loadDiscordRest } from '../../src/rest/discord-rest-loader.js'
import { call, capturingLogger, startUpstream, type Answer, type SeenRequest, type Upstream } from './upstream.js'

const TOKEN = 'SECRET-TOKEN-abc.123'
const AUTH = `Bot ${TOKEN}`
const CHANNEL = '123456789012345678'

async function setup(t: Test, answer?: (req: SeenRequest) => Answer, opts: RestProxyOptions = {}): Promise<{ up: Upstream; proxy: RestProxy; logs: string[] }> {
  const up = await startUpstream(answer)
  const logs: string[] = []
  const proxy = await startRestProxy({ upstream: up.api, logger: capturingLogger(logs), ...opts })
  t.teardown(async () => {
    await proxy.close()
    await up.close()
  })
  return { up, proxy, logs }
}

const plenty = { perSecond: 50, invalidBudget: 100, validForMs: 60_000 }
const metricsOf = async (proxy: RestProxy) => {
  const registry = new Registry()
  proxy.registerMetrics(registry)
  return registry.metrics()
}

t.test('forwards method, version, route, query, body and the bot\'s own headers; answers with Discord\'s status, body and headers (not its bucket headers)', async (t) => {
  const { up, proxy } = await setup(t, () => ({ status: 201, headers: { 'x-ratelimit-remaining': '4', 'x-custom': 'kept' }, body: { id: '1', content: 'hi' } }))
  proxy.setShare(plenty)
  const res = await call(`${proxy.url}/v10/channels/${CHANNEL}/messages?nonce=7&x=a%20b`, {
    method: 'POST',
    headers: { authorization: AUTH, 'content-type': 'application/json', 'x-audit-log-reason': 'why%20not', 'x-other': 'dropped' },
    body: JSON.stringify({ content: 'hi' }),
  })
  t.equal(res.status, 201)
  t.same(res.body, { id: '1', content: 'hi' })
  t.equal(res.headers.get('x-custom'), 'kept')
  t.equal(res.headers.get('x-ratelimit-remaining'), null, 'bucket headers are the proxy\'s business')
  t.equal(up.seen.length, 1)
  const seen = up.seen[0]!
  t.equal(seen.method, 'POST')
  t.equal(seen.url, `/api/v10/channels/${CHANNEL}/messages?nonce=7&x=a+b`)
  t.equal(seen.headers.authorization, AUTH, 'the bot\'s own Authorization')
  t.equal(seen.headers['content-type'], 'application/json')
  t.equal(seen.headers['x-audit-log-reason'], 'why%20not')
  t.equal(seen.headers['x-other'], undefined, 'only the headers Discord needs')
  t.equal(seen.headers['x-pxe-proxy-request'], undefined, 'the proxy\'s own tie never leaves it')
  t.equal(seen.body, '{"content":"hi"}')

  await call(`${proxy.url}/v9/guilds/${CHANNEL}`, { headers: { authorization: AUTH } })
  await call(`${proxy.url}/users/@me`, { headers: { authorization: AUTH } })
  t.same(up.seen.slice(1).map((s) => `${s.method} ${s.url}`), [`GET /api/v9/guilds/${CHANNEL}`, 'GET /api/users/@me'], 'the bot\'s API version is kept, also none')
})

t.test('a Discord error goes back as it came; @discordjs/rest as the bot\'s client works through the proxy', async (t) => {
  const { proxy } = await setup(t, (req) => (req.url.includes('999') ? { status: 404, body: { message: 'Unknown Channel', code: 10003 } } : { status: 200, body: { id: CHANNEL } }))
  proxy.setShare(plenty)
  const bot = new REST({ api: proxy.url }).setToken(TOKEN)
  t.same(await bot.get(`/channels/${CHANNEL}`), { id: CHANNEL })
  await t.rejects(bot.get('/channels/999999999999999999'), { status: 404, code: 10003, message: 'Unknown Channel' })
  t.match(await metricsOf(proxy), /pxe_rest_requests_total\{result="sent"\} 2/)
})

t.test('no Authorization: 401 from the proxy, nothing forwarded, not counted as Discord\'s invalid', async (t) => {
  const { up, proxy } = await setup(t)
  proxy.setShare(plenty)
  for (const headers of [{}, { authorization: '' }, { authorization: '   ' }] as Record<string, string>[]) {
    const res = await call(`${proxy.url}/v10/channels/${CHANNEL}`, { headers })
    t.equal(res.status, 401)
    t.equal(res.headers.get('x-pxe-rest-proxy'), 'no_auth')
  }
  t.equal(up.seen.length, 0, 'nothing reached Discord')
  t.equal(proxy.demand(60_000).invalid10m, 0)
  t.equal(proxy.demand(60_000).perSecond, 0, 'not demand either')
  t.match(await metricsOf(proxy), /pxe_rest_requests_total\{result="refused_no_auth"\} 3/)
})

t.test('no share: requests are held, never sent, and answered 503 after the longest wait', async (t) => {
  const { up, proxy, logs } = await setup(t, undefined, { maxHoldMs: 300 })
  const res = await call(`${proxy.url}/v10/channels/${CHANNEL}`, { headers: { authorization: AUTH } })
  t.equal(res.status, 503)
  t.equal(res.headers.get('x-pxe-rest-proxy'), 'no_share')
  t.ok(Number(res.headers.get('retry-after')) >= 1)
  proxy.setShare({ perSecond: 0, invalidBudget: 10, validForMs: 60_000 })
  t.equal((await call(`${proxy.url}/v10/channels/${CHANNEL}`, { headers: { authorization: AUTH } })).status, 503, 'a share of 0 holds too')
  t.equal(up.seen.length, 0)
  t.ok(proxy.demand(60_000).perSecond > 0, 'held requests count as demand')
  t.match(await metricsOf(proxy), /pxe_rest_requests_total\{result="held_expired"\} 2/)
  t.match(await metricsOf(proxy), /pxe_rest_share_per_second 0/)
  t.equal(logs.filter((l) => l.includes('no REST share')).length, 1, 'said once, not per request')
})

t.test('a held request goes once a share comes; a share that ran out holds again', async (t) => {
  const { up, proxy } = await setup(t, undefined, { maxHoldMs: 5000 })
  const pending = call(`${proxy.url}/v10/channels/${CHANNEL}`, { headers: { authorization: AUTH } })
  await new Promise((r) => setTimeout(r, 200))
  t.equal(up.seen.length, 0, 'held')
  proxy.setShare({ perSecond: 5, invalidBudget: 10, validForMs: 400 })
  t.equal((await pending).status, 200)
  t.match(await metricsOf(proxy), /pxe_rest_share_per_second 5/)
  await new Promise((r) => setTimeout(r, 500))
  t.equal(proxy.share(), null, 'the share ran out')
  const late = await call(`${proxy.url}/v10/channels/${CHANNEL}`, { headers: { authorization: AUTH }, signal: AbortSignal.timeout(300) }).catch((err: Error) => err.name)
  t.equal(late, 'TimeoutError', 'held, not sent')
  t.equal(up.seen.length, 1)
})

t.test('at a share of 4/s, 8 requests at once reach Discord at least 250 ms apart', async (t) => {
  const { up, proxy } = await setup(t)
  proxy.setShare({ perSecond: 4, invalidBudget: 10, validForMs: 60_000 })
  const results = await Promise.all(Array.from({ length: 8 }, (_, i) => call(`${proxy.url}/v10/channels/${BigInt(CHANNEL) + BigInt(i)}`, { headers: { authorization: AUTH } })))
  t.same(results.map((r) => r.status), Array(8).fill(200))
  const gaps = up.seen.slice(1).map((s, i) => s.at - up.seen[i]!.at)
  // received times carry the loopback's jitter: each gap near 250 ms, and 7 gaps at least 7 × 250 ms together
  t.ok(gaps.every((g) => g >= 200), `gaps ${gaps.map(Math.round).join(', ')} ms`)
  t.ok(up.seen.at(-1)!.at - up.seen[0]!.at >= 7 * 250 - 20, 'the span of 8 at 4/s')
})

t.test('the invalid budget: once spent, the proxy answers 429 itself and sends nothing', async (t) => {
  const { up, proxy, logs } = await setup(t, () => ({ status: 403, body: { message: 'Missing Access', code: 50001 } }))
  proxy.setShare({ perSecond: 50, invalidBudget: 3, validForMs: 60_000 })
  const statuses: (string | number)[] = []
  for (let i = 0; i < 6; i++) {
    const res = await call(`${proxy.url}/v10/channels/${CHANNEL}`, { headers: { authorization: AUTH } })
    statuses.push(res.status === 429 ? `429 ${res.headers.get('x-pxe-rest-proxy')}` : res.status)
    if (res.status === 429) {
      t.match(res.body, { global: false, retry_after: Number }, 'shaped like Discord\'s 429')
      t.ok(Number(res.headers.get('retry-after')) >= 1)
    }
  }
  t.same(statuses, [403, 403, 403, '429 invalid_budget', '429 invalid_budget', '429 invalid_budget'])
  t.equal(up.seen.length, 3, 'Discord met 3 invalid requests, no more')
  t.equal(proxy.demand(60_000).invalid10m, 3)
  t.equal(logs.filter((l) => l.includes('invalid-request budget is spent')).length, 1, 'said once')
  proxy.setShare({ perSecond: 50, invalidBudget: 4, validForMs: 60_000 })
  t.equal((await call(`${proxy.url}/v10/channels/${CHANNEL}`, { headers: { authorization: AUTH } })).status, 403, 'a larger budget lets one more through')
  t.equal(up.seen.length, 4)
})

t.test('a 429 from Discord: counted invalid (not with scope shared), waited out, sent again within the share', async (t) => {
  let n = 0
  const { up, proxy } = await setup(t, (req) => {
    n += 1
    if (n === 1) return { status: 429, headers: { 'retry-after': '0.3', 'x-ratelimit-scope': 'user' }, body: { message: 'You are being rate limited.', retry_after: 0.3, global: false } }
    if (n === 2) return { status: 429, headers: { 'retry-after': '0.2', 'x-ratelimit-scope': 'shared' }, body: { message: 'shared', retry_after: 0.2, global: false } }
    return { status: 200, body: { url: req.url } }
  })
  proxy.setShare(plenty)
  const res = await call(`${proxy.url}/v10/channels/${CHANNEL}`, { headers: { authorization: AUTH } })
  t.equal(res.status, 200, 'the bot sees the answer, not the 429s')
  t.equal(up.seen.length, 3)
  t.ok(up.seen[1]!.at - up.seen[0]!.at >= 290, 'Retry-After honoured')
  t.equal(proxy.demand(60_000).invalid10m, 1, 'the shared-scope 429 is not invalid')
  t.match(await metricsOf(proxy), /pxe_rest_requests_total\{result="upstream_429"\} 2/)
})

t.test('a bot that ignores the 429s: the queue is bounded, the rest is refused at once, and Discord sees no more than the share', async (t) => {
  const { up, proxy } = await setup(t, undefined, { maxQueued: 4, maxHoldMs: 3000 })
  proxy.setShare({ perSecond: 2, invalidBudget: 10, validForMs: 60_000 })
  const started = performance.now()
  const results = await Promise.all(Array.from({ length: 60 }, (_, i) => call(`${proxy.url}/v10/channels/${BigInt(CHANNEL) + BigInt(i)}`, { headers: { authorization: AUTH } }).then((r) => ({ ...r, after: performance.now() - started }))))
  const full = results.filter((r) => r.headers.get('x-pxe-rest-proxy') === 'queue_full')
  const elapsed = performance.now() - started
  t.ok(full.length >= 50, `${full.length} of 60 refused 429 queue_full`)
  t.ok(full.every((r) => r.status === 429 && r.after < 1000), 'at once')
  t.equal(results.filter((r) => r.status === 200).length, up.seen.length, 'the others were sent (or held too long)')
  t.ok(up.seen.length <= 1 + Math.ceil(elapsed / 500), `${up.seen.length} sent in ${Math.round(elapsed)} ms`)
  const gaps = up.seen.slice(1).map((s, i) => s.at - up.seen[i]!.at)
  t.ok(gaps.every((g) => g >= 450), `never faster than 2/s (with the loopback's jitter): gaps ${gaps.map(Math.round).join(', ')} ms`)
  t.ok(proxy.demand(60_000).perSecond >= 60 / 5, 'every arrival is demand')
})

t.test('held too long with a share: 429 with Retry-After, and that request is never sent later', async (t) => {
  const { up, proxy } = await setup(t, undefined, { maxHoldMs: 400 })
  proxy.setShare({ perSecond: 1, invalidBudget: 10, validForMs: 60_000 })
  const results = await Promise.all([0, 1, 2].map((i) => call(`${proxy.url}/v10/channels/${BigInt(CHANNEL) + BigInt(i)}`, { headers: { authorization: AUTH } })))
  t.same(results.map((r) => r.status), [200, 429, 429])
  t.same(results.slice(1).map((r) => r.headers.get('x-pxe-rest-proxy')), ['held_too_long', 'held_too_long'])
  await new Promise((r) => setTimeout(r, 2200))
  t.equal(up.seen.length, 1, 'the expired ones did not go when their turn would have come')
})

t.test('a bot that hangs up while held: its request is never sent', async (t) => {
  const { up, proxy } = await setup(t)
  const gone = call(`${proxy.url}/v10/channels/${CHANNEL}`, { headers: { authorization: AUTH }, signal: AbortSignal.timeout(200) }).catch((err: Error) => err.name)
  t.equal(await gone, 'TimeoutError')
  await new Promise((r) => setTimeout(r, 100))
  proxy.setShare(plenty)
  await new Promise((r) => setTimeout(r, 300))
  t.equal(up.seen.length, 0)
  t.match(await metricsOf(proxy), /pxe_rest_requests_total\{result="client_gone"\} 1/)
})

t.test('bad requests are answered by the proxy and never forwarded', async (t) => {
  const { up, proxy } = await setup(t, undefined, { maxBodyBytes: 1000 })
  proxy.setShare(plenty)
  const origin = proxy.url.replace(/\/api$/, '')
  const cases: [string, RequestInit, number, string][] = [
    [`${origin}/v10/channels/${CHANNEL}`, { headers: { authorization: AUTH } }, 404, 'not_found'],
    [`${origin}/`, { headers: { authorization: AUTH } }, 404, 'not_found'],
    [`${proxy.url}/`, { headers: { authorization: AUTH } }, 404, 'not_found'],
    [`${proxy.url}/v10/channels/${CHANNEL}`, { method: 'OPTIONS', headers: { authorization: AUTH } }, 405, 'method_not_allowed'],
    [`${proxy.url}/v10/channels/${CHANNEL}`, { method: 'HEAD', headers: { authorization: AUTH } }, 405, 'method_not_allowed'],
    [`${proxy.url}/v10/channels/${CHANNEL}/messages`, { method: 'POST', headers: { authorization: AUTH }, body: 'x'.repeat(1001) }, 413, 'body_too_large'],
  ]
  for (const [url, init, status, reason] of cases) {
    const res = await call(url, init)
    t.equal(res.status, status, `${init.method ?? 'GET'} ${url.slice(origin.length)}`)
    t.equal(res.headers.get('x-pxe-rest-proxy'), reason)
  }
  t.same(up.seen, [], 'nothing went')
})

t.test('Discord unreachable: 502 to the bot, and the token is never logged, whatever happened', async (t) => {
  const { up, proxy, logs } = await setup(t, () => ({ status: 401, body: { message: '401: Unauthorized', code: 0 } }), { maxHoldMs: 300 })
  await call(`${proxy.url}/v10/channels/${CHANNEL}`, { headers: { authorization: AUTH } }) // held, 503
  proxy.setShare(plenty)
  t.equal((await call(`${proxy.url}/v10/channels/${CHANNEL}`, { headers: { authorization: AUTH } })).status, 401)
  await up.close()
  const res = await call(`${proxy.url}/v10/channels/${CHANNEL}`, { headers: { authorization: AUTH } })
  t.equal(res.status, 502)
  t.equal(res.headers.get('x-pxe-rest-proxy'), 'upstream_error')
  t.ok(logs.length >= 3, `${logs.length} log lines`)
  t.same(logs.filter((l) => l.includes(TOKEN) || l.includes('SECRET')), [], 'no line holds the token')
})

t.test('setShare refuses a share that is not a share, and keeps the one in force', async (t) => {
  const { proxy } = await setup(t)
  proxy.setShare({ perSecond: 3, invalidBudget: 5, validForMs: 60_000 })
  for (const bad of [{ perSecond: -1, invalidBudget: 5, validForMs: 1 }, { perSecond: Number.NaN, invalidBudget: 5, validForMs: 1 }, { perSecond: 1, invalidBudget: 1.5, validForMs: 1 }, { perSecond: 1, invalidBudget: 5, validForMs: Number.POSITIVE_INFINITY }]) {
    t.throws(() => proxy.setShare(bad), RangeError)
  }
  t.match(proxy.share(), { perSecond: 3, invalidBudget: 5 })
})

t.test('without @discordjs/rest the proxy does not start, and says what to install', async (t) => {
  const missing = Object.assign(new Error("Cannot find package '@discordjs/rest'"), { code: 'ERR_MODULE_NOT_FOUND' })
  await t.rejects(loadDiscordRest(() => Promise.reject(missing)), { name: 'RestProxyUnavailableError', message: /optional peer dependency @discordjs\/rest \(~2\.6\.3\), but it is not installed: run "npm install @discordjs\/rest@~2\.6\.3"/ })
  await t.rejects(loadDiscordRest(() => Promise.resolve({})), { name: 'RestProxyUnavailableError', message: /cannot be loaded/ })
  t.equal(typeof (await loadDiscordRest()).REST, 'function', 'installed here: loads')
})

t.test('bad options are refused before anything listens', async (t) => {
  await t.rejects(startRestProxy({ listen: '127.0.0.1:99999' }), { name: 'RangeError', message: /0..65535/ })
  await t.rejects(startRestProxy({ upstream: 'http://discord.com/api' }), { name: 'RangeError', message: /loopback/ })
  await t.rejects(startRestProxy({ maxHoldMs: 0 }), { name: 'RangeError', message: /maxHoldMs/ })
})

t.test('demand: arrivals, and the requests still held from the previous window again (a bot that waits for answers)', async (t) => {
  const { proxy } = await setup(t, undefined, { maxHoldMs: 5000 })
  const pending = [0, 1, 2].map((i) => call(`${proxy.url}/v10/channels/${BigInt(CHANNEL) + BigInt(i)}`, { headers: { authorization: AUTH } }))
  await new Promise((r) => setTimeout(r, 1100))
  const first = proxy.demand(600_000).perSecond // 3 arrivals over the ~1.1 s since the start
  const second = proxy.demand(600_000).perSecond // the same 3 arrivals, and the 3 still held
  t.ok(first > 0 && second > first * 1.5, `first ${first}/s, then ${second}/s`)
  proxy.setShare(plenty)
  await Promise.all(pending)
})

t.test('a host beyond loopback is allowed, and logged as a warning', async (t) => {
  const logs: string[] = []
  const proxy = await startRestProxy({ listen: '0.0.0.0:0', logger: capturingLogger(logs) })
  t.teardown(() => proxy.close())
  t.match(proxy.url, /^http:\/\/0\.0\.0\.0:\d+\/api$/)
  t.ok(logs.some((l) => JSON.parse(l).level === 40 && l.includes('beyond loopback')), 'a warning')
})
