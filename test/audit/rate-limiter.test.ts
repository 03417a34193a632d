import t from 'tap'
import { OVERFLOW_KEY, WindowRateLimiter } from '../../src/audit/rate-limiter.js'

const allowed = (l: WindowRateLimiter, now: number, key: string, times: number): number => {
  let n = 0
  for (let i = 0; i < times; i++) if (l.allow(now, key)) n++
  return n
}

t.test('at most maxPerWindow lines per key, then one summary when the window ends', async (t) => {
  const l = new WindowRateLimiter({ maxPerWindow: 3, windowMs: 1000, maxKeys: 10 })
  t.equal(allowed(l, 0, 'a', 10), 3)
  t.equal(allowed(l, 999, 'a', 2), 0)
  t.equal(allowed(l, 500, 'b', 2), 2, 'keys are independent')
  t.same(l.takeSuppressed(999), [], 'nothing before the window ends')
  t.same(l.takeSuppressed(1000), [{ key: 'a', count: 9, since: 0, until: 1000 }])
  t.same(l.takeSuppressed(5000), [], 'each summary is reported once; b suppressed nothing')
  t.equal(l.trackedKeys, 0, 'ended windows are freed')
  t.equal(allowed(l, 5000, 'a', 4), 3, 'a new window allows again')
})

t.test('a window ended by a new event is still summarized, merged per key', async (t) => {
  const l = new WindowRateLimiter({ maxPerWindow: 1, windowMs: 100, maxKeys: 10 })
  t.equal(allowed(l, 0, 'a', 5), 1)
  t.equal(allowed(l, 100, 'a', 5), 1)
  t.equal(allowed(l, 250, 'a', 3), 1)
  t.same(l.takeSuppressed(300), [{ key: 'a', count: 8, since: 0, until: 200 }], 'two ended windows, one summary')
  t.same(l.takeSuppressed(350), [{ key: 'a', count: 2, since: 250, until: 350 }])
})

t.test('a flood from many keys stays bounded', async (t) => {
  const l = new WindowRateLimiter({ maxPerWindow: 2, windowMs: 1000, maxKeys: 4 })
  let logged = 0
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 200; i++) if (l.allow(10 + round, `10.0.0.${i}`)) logged++
  }
  t.equal(logged, (4 + 1) * 2, 'maxKeys keys plus the overflow key')
  t.equal(l.trackedKeys, 5)
  const summaries = l.takeSuppressed(2000)
  t.same(summaries.map((s) => s.key).sort(), ['10.0.0.0', '10.0.0.1', '10.0.0.2', '10.0.0.3', OVERFLOW_KEY].sort())
  t.equal(summaries.reduce((sum, s) => sum + s.count, 0), 600 - logged, 'every suppressed event is counted')
})

t.test('maxPerWindow 0 logs nothing but counts; bad settings are refused', async (t) => {
  const l = new WindowRateLimiter({ maxPerWindow: 0, windowMs: 10, maxKeys: 1 })
  t.equal(allowed(l, 0, 'a', 3), 0)
  t.same(l.takeSuppressed(10), [{ key: 'a', count: 3, since: 0, until: 10 }])
  t.throws(() => new WindowRateLimiter({ maxPerWindow: 1, windowMs: 0, maxKeys: 1 }), RangeError)
  t.throws(() => new WindowRateLimiter({ maxPerWindow: 1, windowMs: 10, maxKeys: 0 }), RangeError)
})
