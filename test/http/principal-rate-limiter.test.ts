import t from 'tap'
import { PrincipalRateLimiter } from '../../src/http/principal-rate-limiter.js'

function setup() {
  let clock = 1_000_000
  const limiter = new PrincipalRateLimiter({ node: { perSecond: 5, burst: 20 }, operator: { perSecond: 20, burst: 40 } }, () => clock)
  return { limiter, advance: (ms: number) => (clock += ms) }
}

t.test('burst, then one token per 1/rate, with the exact wait', async (t) => {
  const { limiter, advance } = setup()
  for (let i = 0; i < 20; i++) t.equal(limiter.take('node', 'aa'), null, `burst ${i + 1}`)
  t.same(limiter.take('node', 'aa'), { retryAfterMs: 200 }, 'the 21st waits 1/5 s')
  advance(199)
  t.same(limiter.take('node', 'aa'), { retryAfterMs: 1 }, 'still 1 ms short')
  advance(1)
  t.equal(limiter.take('node', 'aa'), null, 'one token back after 200 ms')
  t.ok(limiter.take('node', 'aa'), 'and spent')
})

t.test('principals and roles are independent; operators get their own rate', async (t) => {
  const { limiter } = setup()
  for (let i = 0; i < 20; i++) limiter.take('node', 'aa')
  t.ok(limiter.take('node', 'aa'), 'aa is limited')
  t.equal(limiter.take('node', 'bb'), null, 'bb is not')
  for (let i = 0; i < 40; i++) t.equal(limiter.take('operator', 'aa'), null, `operator burst ${i + 1}`)
  t.same(limiter.take('operator', 'aa'), { retryAfterMs: 50 })
})

t.test('refills never exceed the burst; idle principals are forgotten once the map grows', async (t) => {
  const { limiter: one, advance } = setup()
  one.take('node', 'aa')
  advance(3_600_000)
  for (let i = 0; i < 20; i++) t.equal(one.take('node', 'aa'), null)
  t.ok(one.take('node', 'aa'), 'an hour idle still gives only the burst')
  let clock = 0
  const limiter = new PrincipalRateLimiter({ node: { perSecond: 5, burst: 20 }, operator: { perSecond: 20, burst: 40 } }, () => clock, 100)
  for (let i = 0; i < 100; i++) limiter.take('node', `k${i}`)
  limiter.take('node', 'busy')
  t.equal(limiter.tracked, 101, 'nothing is full yet: nothing dropped')
  clock = 10_000 // every bucket refilled
  for (let i = 0; i < 101; i++) limiter.take('node', `m${i}`)
  t.ok(limiter.tracked <= 102, `refilled buckets dropped (${limiter.tracked} left)`)
  for (let i = 0; i < 20; i++) limiter.take('node', 'm0')
  t.ok(limiter.take('node', 'm0'), 'a busy bucket is kept and still limits')
})
