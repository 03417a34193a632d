// The emulator's REST limits on their own, with the time as a parameter: the sliding global window,
// per-route buckets, invalid-request counting and bans, the records' window arithmetic, and options.
import t from 'tap'
import { GlobalWindow, InvalidLedger, RouteBuckets } from '../support/gateway/rest-limits.js'
import { resolveRestOptions, type RestEmulatorOptions } from '../support/gateway/rest-options.js'
import { maxInWindow, perWholeSecond } from '../support/gateway/rest-records.js'
import { matchRoute } from '../support/gateway/rest-routes.js'

t.test('global window: 50 in any 1000 ms; the 51st is refused until the oldest leaves', async (t) => {
  const w = new GlobalWindow(50)
  for (let i = 0; i < 50; i++) t.same(w.take(i), { ok: true })
  t.same(w.take(500), { ok: false, retryAfterMs: 500 }, 'the one at 0 ms leaves at 1000 ms')
  t.same(w.take(999.5), { ok: false, retryAfterMs: 0.5 })
  t.same(w.take(1000), { ok: true }, 'exactly 1000 ms later the first has left')
  t.same(w.take(1000.5), { ok: false, retryAfterMs: 0.5 }, 'the one at 1 ms is next to leave')
})

t.test('global window: sliding, not aligned to whole seconds', async (t) => {
  const w = new GlobalWindow(50)
  for (let i = 0; i < 25; i++) t.same(w.take(0), { ok: true })
  for (let i = 0; i < 25; i++) t.same(w.take(600), { ok: true })
  // A fixed window on whole seconds would admit 50 more at 1100 ms; the sliding one still holds the 25 from 600 ms.
  let admitted = 0
  for (let i = 0; i < 26; i++) if (w.take(1100).ok) admitted++
  t.equal(admitted, 25)
  t.same(w.take(1100), { ok: false, retryAfterMs: 500 })
})

t.test('global window: over random arrivals, no 1000 ms ever holds more than the limit, and every refusal was due', async (t) => {
  let seed = 7
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31)
  for (let run = 0; run < 20; run++) {
    const limit = 1 + Math.floor(random() * 20)
    const w = new GlobalWindow(limit)
    const admitted: number[] = []
    let now = 0
    let dueRefusals = true
    for (let i = 0; i < 500; i++) {
      now += random() * 60
      const verdict = w.take(now)
      if (verdict.ok) admitted.push(now)
      else if (admitted.filter((a) => a > now - 1000).length < limit || verdict.retryAfterMs <= 0) dueRefusals = false
    }
    t.ok(maxInWindow(admitted, 1000) <= limit, `run ${run}: at most ${limit} admitted in any window`)
    t.ok(dueRefusals, `run ${run}: refused only with ${limit} admitted in the last 1000 ms`)
  }
})

t.test('route buckets: limit per window from the first request, per key; a refusal spends nothing', async (t) => {
  const b = new RouteBuckets()
  const five = { limit: 5, windowMs: 5000 }
  for (let i = 0; i < 5; i++) t.same(b.take('create_message:1', five, 100 + i), { ok: true, limit: 5, remaining: 4 - i, resetAt: 5100 })
  t.same(b.take('create_message:1', five, 200), { ok: false, limit: 5, remaining: 0, resetAt: 5100 })
  t.same(b.take('create_message:2', five, 200), { ok: true, limit: 5, remaining: 4, resetAt: 5200 }, 'another channel, another bucket')
  t.same(b.take('create_message:1', five, 5100), { ok: true, limit: 5, remaining: 4, resetAt: 10_100 }, 'refilled at its reset')
})

t.test('invalid ledger: the limit-th invalid answer in the window bans for banMs; counting starts afresh after', async (t) => {
  const l = new InvalidLedger(3, 1000, 500)
  t.equal(l.count('a', 0), null)
  t.equal(l.count('a', 600), null)
  t.equal(l.count('a', 1100), null, 'the one at 0 ms has left the window: 2 in it')
  t.equal(l.inWindow('a', 1100), 2)
  t.equal(l.count('b', 1100), null, 'clients are counted apart')
  t.same(l.count('a', 1200), { client: 'a', at: 1200, until: 1700 })
  t.same(l.banOf('a', 1699), { client: 'a', at: 1200, until: 1700 })
  t.equal(l.banOf('b', 1300), null)
  t.same(l.bannedAt(1300), ['a'])
  t.equal(l.banOf('a', 1700), null, 'the ban ends')
  t.equal(l.inWindow('a', 1700), 0, 'the ban cleared the count')
  t.same(l.totalsByClient(), { a: 4, b: 1 })
  t.same(l.inWindowByClient(1700), { b: 1 })
})

t.test('records: the most in any half-open 1000 ms window, and per whole second', async (t) => {
  t.equal(maxInWindow([], 1000), 0)
  t.equal(maxInWindow([0, 999.9, 1000, 1500], 1000), 3, '999.9, 1000 and 1500')
  t.equal(maxInWindow([1500, 0, 1000, 999.9], 1000), 3, 'any order')
  t.equal(maxInWindow([0, 1000, 2000], 1000), 1, 'exactly 1000 ms apart never share a window')
  t.same(perWholeSecond([0, 999, 1000, 3500]), [2, 1, 0, 1])
})

t.test('routes: major parameters, 404 for unknown paths and versions, 405 for a known path', async (t) => {
  t.match(matchRoute('POST', '/api/v10/channels/123/messages'), { kind: 'route', route: { name: 'create_message' }, majorId: '123' })
  t.match(matchRoute('GET', '/api/v10/channels/123/messages'), { kind: 'route', route: { name: 'get_channel_messages' }, majorId: '123' })
  t.match(matchRoute('GET', '/api/v10/users/@me'), { kind: 'route', route: { name: 'get_current_user' }, majorId: null })
  t.same(matchRoute('DELETE', '/api/v10/channels/123'), { kind: 'method_not_allowed' })
  for (const path of ['/api/v9/users/@me', '/api/v10/channels/abc', '/api/v10/channels/1/pins', '/api/v10/users/@me/', '/users/@me', '/api/v10'])
    t.same(matchRoute('GET', path), { kind: 'not_found' }, path)
})

t.test('options: defaults are Discord\'s; bad values are refused with a clear error', async (t) => {
  t.match(resolveRestOptions(), { globalPerSecond: 50, invalidLimit: 10_000, invalidWindowMs: 600_000, banMs: 3_600_000, clientHeader: 'x-emulator-client' })
  t.equal(resolveRestOptions({ clientHeader: 'X-Node' }).clientHeader, 'x-node')
  t.equal(resolveRestOptions({ clientHeader: null }).clientHeader, null)
  const bad: Array<[string, RestEmulatorOptions, RegExp]> = [
    ['fail/zero global', { globalPerSecond: 0 }, /globalPerSecond must be a positive integer/],
    ['fail/fractional global', { globalPerSecond: 1.5 }, /globalPerSecond/],
    ['fail/negative invalid limit', { invalidLimit: -1 }, /invalidLimit/],
    ['fail/NaN ban', { banMs: Number.NaN }, /banMs/],
    ['fail/zero window', { invalidWindowMs: 0 }, /invalidWindowMs/],
    ['fail/unknown route', { routeLimits: { no_such_route: { limit: 1, windowMs: 1 } } as never }, /no_such_route, not a route with a bucket/],
    ['fail/route without a bucket', { routeLimits: { get_gateway_bot: { limit: 1, windowMs: 1 } } as never }, /get_gateway_bot/],
    ['fail/zero bucket limit', { routeLimits: { create_message: { limit: 0, windowMs: 1000 } } }, /routeLimits\.create_message\.limit/],
  ]
  for (const [name, options, message] of bad) t.throws(() => resolveRestOptions(options), { name: 'RangeError', message }, name)
})
