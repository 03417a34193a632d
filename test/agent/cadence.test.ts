// Check-in cadence: lease/3 within ±10 %, quick retries after a failure that never exceed it.
import t from 'tap'
import { CheckinCadence } from '../../src/agent/cadence.js'

t.test('every lease/3 with at most ±10 % jitter', async (t) => {
  for (const r of [0, 0.5, 0.999]) {
    const cadence = new CheckinCadence(() => r)
    cadence.setLease(30_000)
    const next = cadence.next()
    t.ok(next >= 9000 && next <= 11_000, `random ${r}: ${next} ms`)
  }
  t.equal(new CheckinCadence(() => 0.5).next(), 10_000, 'before the first answer the SPEC default lease (30 s) is assumed')
})

t.test('after failures: 0.5 s, 1 s, 2 s ... capped at the regular delay, reset by a success', async (t) => {
  const cadence = new CheckinCadence(() => 0.5)
  cadence.setLease(6000)
  t.same([cadence.retry(), cadence.retry(), cadence.retry(), cadence.retry()], [500, 1000, 2000, 2000])
  t.equal(cadence.next(), 2000)
  t.equal(cadence.retry(), 500, 'the count starts over after a success')
})

t.test('with authority: a retry lands in the first half of the slack, never later, never in a tight loop', async (t) => {
  for (const r of [0, 0.5, 0.999]) {
    const cadence = new CheckinCadence(() => r)
    cadence.setLease(30_000)
    const d = cadence.retry({ slackMs: 8000, busyRetryAfterMs: null })
    t.ok(d >= 2000 && d <= 4000, `random ${r}: ${d} ms within [slack/4, slack/2]`)
  }
  const cadence = new CheckinCadence(() => 0.5)
  cadence.setLease(30_000)
  t.equal(cadence.retry({ slackMs: 0, busyRetryAfterMs: null }), 500, 'no slack left: a last attempt soon (0.25-0.75 s), never a tight loop')
  t.equal(cadence.retry({ slackMs: 200, busyRetryAfterMs: null }), 500, 'nor with a little slack left')
  t.equal(cadence.retry({ slackMs: 200_000, busyRetryAfterMs: null }), 10_000, 'never later than the regular delay')
})

t.test('the node whose authority ends first comes back first, whatever the jitter', async (t) => {
  const early = new CheckinCadence(() => 0.999)
  const late = new CheckinCadence(() => 0)
  for (const c of [early, late]) c.setLease(30_000)
  t.ok(early.retry({ slackMs: 4000, busyRetryAfterMs: null }) < late.retry({ slackMs: 8100, busyRetryAfterMs: null }))
})

t.test('halving the slack each time: the attempts of a node whose controller stays away all come before its fail-safe', async (t) => {
  const cadence = new CheckinCadence(() => 0.999)
  cadence.setLease(30_000)
  let now = 0
  const failSafeAt = 10_000 // what the node can afford, the answer's reserve already taken off
  const attempts: number[] = []
  while (now < failSafeAt && attempts.length < 50) {
    now += cadence.retry({ slackMs: Math.max(0, failSafeAt - now), busyRetryAfterMs: null })
    attempts.push(now)
  }
  t.ok(attempts.length >= 5, `${attempts.length} attempts before the fail-safe: ${attempts.join(', ')}`)
  t.ok(attempts.slice(0, -1).every((at) => at < failSafeAt), 'all but the last within the slack')
  t.ok(attempts.length <= 20, `no tight loop at the end: ${attempts.length} attempts`)
})

t.test('a busy controller\'s appointment is kept unless the slack ends sooner', async (t) => {
  const cadence = new CheckinCadence(() => 0.5)
  cadence.setLease(30_000)
  t.equal(cadence.retry({ slackMs: null, busyRetryAfterMs: 3000 }), 3150, 'joining: the appointment, jittered by at most 10 %')
  t.equal(cadence.retry({ slackMs: 20_000, busyRetryAfterMs: 3000 }), 3150, 'slack to spare: the appointment')
  // A saturated controller keeps an early returner in a longer queue: 1.5 s more of the slack stays in reserve.
  t.equal(cadence.retry({ slackMs: 5000, busyRetryAfterMs: 30_000 }), 2625, 'the slack ends first: in the second half of the slack less 1.5 s')
  t.equal(cadence.retry({ slackMs: 5000, busyRetryAfterMs: 4000 }), 2625, 'also when the appointment falls in the last 1.5 s of the slack')
  t.equal(new CheckinCadence(() => 0.999).retry({ slackMs: 5000, busyRetryAfterMs: 30_000 }), 3498, 'never later than the slack less 1.5 s')
  t.equal(cadence.retry({ slackMs: 1000, busyRetryAfterMs: 30_000 }), 500, 'less than 1.5 s of slack: the last attempts (0.25–0.75 s apart)')
  t.equal(cadence.retry({ slackMs: null, busyRetryAfterMs: 20_000 }), 21_000, 'joining nodes wait as long as told, even beyond the regular delay')
  t.equal(cadence.retry({ slackMs: null, busyRetryAfterMs: 999_999_999 }), 31_500, 'but never beyond what a controller ever gives (30 s): a forged notice cannot park a node')
  t.equal(cadence.retry({ slackMs: 0, busyRetryAfterMs: 5000 }), 500, 'out of slack: the last attempts go before the appointment')
})

t.test('without authority: wide jitter, so that a fleet joining at once does not come back at once', async (t) => {
  const lows = new CheckinCadence(() => 0)
  const highs = new CheckinCadence(() => 0.999)
  for (const c of [lows, highs]) c.setLease(60_000)
  t.same([lows.retry(), lows.retry(), lows.retry()], [250, 500, 1000])
  t.same([highs.retry(), highs.retry(), highs.retry()], [750, 1499, 2998])
})
