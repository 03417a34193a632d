// The sliding counts (invalid responses over 10 minutes, arrivals over a check-in interval) on a manual
// clock, what counts as invalid, and the listen address and upstream checks of the proxy.
import t from 'tap'
import { SlidingCount } from '../../src/rest/sliding-count.js'
import { isInvalidResponse, INVALID_WINDOW_MS } from '../../src/rest/invalid-responses.js'
import { parseListenAddress, isRemoteListen, upstreamProblem } from '../../src/rest/listen-address.js'

t.test('invalid responses: 401, 403, 429 unless its scope is shared', async (t) => {
  const cases: [number, string | null, boolean][] = [
    [200, null, false], [204, null, false], [400, null, false], [404, null, false], [500, null, false],
    [401, null, true], [403, null, true], [429, null, true], [429, 'user', true], [429, 'global', true],
    [429, 'shared', false], [429, 'Shared', false], [401, 'shared', true],
  ]
  for (const [status, scope, want] of cases) t.equal(isInvalidResponse(status, scope), want, `${status} scope ${scope}`)
})

t.test('a 10-minute window: counts, slides out (never early), and says when it falls below a limit', async (t) => {
  const w = new SlidingCount(INVALID_WINDOW_MS)
  w.add(0)
  w.add(500, 2)
  w.add(60_000)
  t.equal(w.count(60_000), 4)
  t.equal(w.count(599_999), 4, 'still inside 10 minutes')
  t.equal(w.count(601_000), 1, 'the first second left once 10 minutes had passed after it ended')
  t.equal(w.count(661_000), 0)
  w.add(700_000, 3)
  t.equal(w.msUntilBelow(4, 700_000), 0, 'already below 4')
  t.equal(w.msUntilBelow(3, 700_000), 601_000, 'below 3 once that second has left the window')
  t.equal(w.count(700_000, 10_000), 3, 'the last 10 s only')
})

t.test('finer buckets: a count errs high by at most one bucket', async (t) => {
  const coarse = new SlidingCount(INVALID_WINDOW_MS)
  const fine = new SlidingCount(INVALID_WINDOW_MS, 100)
  for (let ms = 0; ms < 10_000; ms += 200) {
    coarse.add(ms) // 5 a second for 10 s
    fine.add(ms)
  }
  t.equal(coarse.count(10_500, 3_000), 15, 'whole seconds: the partly covered second 7 counts whole (3 s of arrivals in a window holding 2.5 s)')
  t.equal(fine.count(10_500, 3_000), 12, '100 ms buckets: the arrivals of 7.6 s to 9.8 s, as many as the window holds')
  t.equal(fine.count(10_000, 3_000), 15)
  t.equal(fine.count(10_000), 50, 'the whole window')
  t.equal(fine.msUntilBelow(50, 10_000), 590_100, 'the first bucket leaves 10 minutes after it ends (at 600.1 s)')
})

t.test('memory is bounded by the window, not by the rate', async (t) => {
  const w = new SlidingCount(10_000)
  for (let ms = 0; ms < 100_000; ms += 1) w.add(ms)
  t.equal(w.count(100_000), 10_000)
  t.ok((w as unknown as { buckets: unknown[] }).buckets.length <= 11, 'one bucket a second')
})

t.test('HOST:PORT: the good ones', async (t) => {
  t.same(parseListenAddress('127.0.0.1:8081'), { host: '127.0.0.1', port: 8081 })
  t.same(parseListenAddress('localhost:0'), { host: 'localhost', port: 0 })
  t.same(parseListenAddress('[::1]:65535'), { host: '::1', port: 65535 })
  t.same(parseListenAddress('0.0.0.0:8081'), { host: '0.0.0.0', port: 8081 })
  t.equal(isRemoteListen(parseListenAddress('0.0.0.0:1')), true, 'allowed, but a warning')
  t.equal(isRemoteListen(parseListenAddress('127.0.0.2:1')), false)
})

t.test('HOST:PORT: every bad one is refused with what to fix', async (t) => {
  const bad: [string, RegExp][] = [
    ['', /not HOST:PORT/], ['8081', /not HOST:PORT/], ['127.0.0.1', /not HOST:PORT/], [':8081', /not HOST:PORT/],
    ['127.0.0.1:', /port must be an integer in 0..65535/], ['127.0.0.1:65536', /0..65535/], ['127.0.0.1:-1', /0..65535/],
    ['127.0.0.1:80a', /0..65535/], ['127.0.0.1:1e3', /0..65535/], ['::1:8081', /not HOST:PORT/], ['[127.0.0.1]:8081', /not a host name or IP/],
    ['bad_host:1', /not a host name or IP/], ['a b:1', /not a host name or IP/], ['[::1]', /not HOST:PORT/],
  ]
  for (const [value, message] of bad) t.throws(() => parseListenAddress(value), { name: 'RangeError', message }, JSON.stringify(value))
})

t.test('the upstream: https, or http on loopback only; no credentials, query or fragment', async (t) => {
  t.equal(upstreamProblem('https://discord.com/api'), null)
  t.equal(upstreamProblem('http://127.0.0.1:9999/api'), null)
  t.equal(upstreamProblem('http://[::1]:9999/api'), null)
  t.match(upstreamProblem('http://discord.com/api'), /plain http:\/\/ only on loopback/)
  t.match(upstreamProblem('ftp://127.0.0.1/api'), /https/)
  t.match(upstreamProblem('not a url'), /not a URL/)
  t.match(upstreamProblem('https://u:p@discord.com/api'), /credentials/)
  t.match(upstreamProblem('https://discord.com/api?x=1'), /query/)
})
