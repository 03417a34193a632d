// The pacer as a pure unit on a manual clock: one request per 1/q seconds after the last one SENT, no
// catch-up burst after a pause or a late timer, a lowered share spaces the next request at once, nothing
// goes while the share is 0 or ran out, and an aborted wait leaves the queue.
import t from 'tap'
import { paceDelay, SharePacer } from '../../src/rest/pacer.js'
import { FakeClock } from '../agent/fake-clock.js'

const share = (perSecond: number, untilMs = 1e12) => ({ perSecond, invalidBudget: 100, untilMs })

t.test('paceDelay: the rule as a table', async (t) => {
  const cases: [string, number, number | null, ReturnType<typeof share> | null, number | null][] = [
    ['no share', 0, null, null, null],
    ['a share of 0', 0, null, share(0), null],
    ['a share that ran out', 500, null, share(5, 500), null],
    ['the first request goes at once', 0, null, share(5), 0],
    ['5/s: 200 ms after the last send', 100, 0, share(5), 100],
    ['due: at once', 200, 0, share(5), 0],
    ['long idle: at once, and no more than that (the caller counts the send)', 10_000, 0, share(5), 0],
    ['a fraction: 0.5/s is 2 s apart', 1000, 0, share(0.5), 1000],
  ]
  for (const [name, now, last, s, want] of cases) t.equal(paceDelay(now, last, s), want, name)
})

/** Acquires `n` requests at once and records the clock at each grant. */
function acquireAll(pacer: SharePacer, clock: FakeClock, n: number): number[] {
  const at: number[] = []
  for (let i = 0; i < n; i++) void pacer.acquire().then(() => void at.push(clock.now()))
  return at
}

t.test('10 requests at 5/s: granted 200 ms apart, the first at once', async (t) => {
  const clock = new FakeClock()
  const pacer = new SharePacer(clock)
  pacer.setShare(share(5))
  const at = acquireAll(pacer, clock, 10)
  await clock.advance(5000)
  t.same(at, [0, 200, 400, 600, 800, 1000, 1200, 1400, 1600, 1800])
})

t.test('no share: nothing goes, however long; a share given later starts the queue, without a burst', async (t) => {
  const clock = new FakeClock()
  const pacer = new SharePacer(clock)
  const at = acquireAll(pacer, clock, 4)
  await clock.advance(60_000)
  t.same(at, [], 'held, not refused')
  t.equal(pacer.waiting, 4)
  t.equal(clock.pending, 0, 'no timer spins while there is no share')
  pacer.setShare(share(2))
  await clock.advance(5000)
  t.same(at, [60_000, 60_500, 61_000, 61_500], 'one at once, then 1/q apart: no catch-up for the minute without a share')
})

t.test('a share of 0 and a share that ran out hold like no share', async (t) => {
  const clock = new FakeClock()
  const pacer = new SharePacer(clock)
  pacer.setShare(share(0))
  const at = acquireAll(pacer, clock, 1)
  await clock.advance(1000)
  t.same(at, [])
  pacer.setShare(share(10, clock.now() + 250)) // 250 ms of 10/s: three go (at 1000, 1100, 1200)
  const more = acquireAll(pacer, clock, 5)
  await clock.advance(2000)
  t.same([...at, ...more], [1000, 1100, 1200], 'nothing after the share ran out')
  t.equal(pacer.current(), null, 'no share in force')
  t.equal(pacer.waiting, 3)
})

t.test('a lowered share spaces the next request from the last send at the new rate; a raised one at its rate', async (t) => {
  const clock = new FakeClock()
  const pacer = new SharePacer(clock)
  pacer.setShare(share(10))
  const at = acquireAll(pacer, clock, 3)
  await clock.advance(150) // granted at 0 and 100; the third due at 200
  pacer.setShare(share(1))
  await clock.advance(2000)
  t.same(at, [0, 100, 1100], 'the third went 1 s after the second, not at 200')
  const more = acquireAll(pacer, clock, 2)
  pacer.setShare(share(4))
  await clock.advance(2000)
  t.same(more, [2150, 2400], 'at once (idle long enough), then 250 ms apart')
})

t.test('a timer that fires late gives no burst: the next request goes 1/q after the late one', async (t) => {
  // A clock whose timers fire 300 ms late, as a blocked event loop would.
  const clock = new FakeClock()
  const late = Object.assign(Object.create(clock) as FakeClock, { setTimeout: (fn: () => void, ms: number) => clock.setTimeout(fn, ms + 300) })
  const pacer = new SharePacer(late)
  pacer.setShare(share(10))
  const at = acquireAll(pacer, clock, 4)
  await clock.advance(3000)
  t.same(at, [0, 400, 800, 1200], 'each 100 ms interval became 400 ms: never two at once to make up')
  for (let i = 1; i < at.length; i++) t.ok(at[i]! - at[i - 1]! >= 100, 'never closer than 1/q')
})

t.test('an aborted wait rejects with AbortError and leaves the queue; the others keep their turn', async (t) => {
  const clock = new FakeClock()
  const pacer = new SharePacer(clock)
  pacer.setShare(share(1))
  const first = pacer.acquire()
  const gone = new AbortController()
  const second = pacer.acquire(gone.signal)
  const third = pacer.acquire()
  await first
  gone.abort()
  await t.rejects(second, { name: 'AbortError' })
  t.equal(pacer.waiting, 1)
  await clock.advance(1000)
  await third
  t.equal(clock.now(), 1000, 'the third took the second\'s slot, 1 s after the first')
  await t.rejects(pacer.acquire(gone.signal), { name: 'AbortError' }, 'an already aborted signal is refused at once')
})

t.test('random shares and arrivals: no two grants closer than 1/q of the share in force at the later one', async (t) => {
  const clock = new FakeClock()
  const pacer = new SharePacer(clock)
  let seed = 7
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31)
  const grants: { at: number; q: number }[] = []
  let q = 5
  pacer.setShare(share(q))
  for (let step = 0; step < 200; step++) {
    for (let i = Math.floor(rnd() * 4); i > 0; i--) void pacer.acquire().then(() => void grants.push({ at: clock.now(), q }))
    if (rnd() < 0.1) {
      q = [0, 0.5, 2, 5, 20, 45][Math.floor(rnd() * 6)]!
      pacer.setShare(share(q))
    }
    await clock.advance(Math.floor(rnd() * 300))
  }
  t.ok(grants.length > 50, `${grants.length} grants`)
  for (let i = 1; i < grants.length; i++) {
    const gap = grants[i]!.at - grants[i - 1]!.at
    if (gap + 1e-9 < 1000 / grants[i]!.q) t.fail(`grant ${i} came ${gap} ms after the previous at ${grants[i]!.q}/s`)
  }
  t.ok(grants.every((g) => g.q > 0), 'none while the share was 0')
})
