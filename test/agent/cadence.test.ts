// Check-in cadence: lease/3 within ±10 %, quick retries after a failure that never exceed it.
import t from 'tap'
import { CheckinCadence, longestRegularDelayMs } from '../../src/agent/cadence.js'

t.test('every lease/3 with at most ±10 % jitter', async (t) => {
  for (const r of [0, 0.5, 0.999]) {
    const cadence = new CheckinCadence(() => r)
    cadence.setLease(30_000)
    const next = cadence.next()
    t.ok(next >= 9000 && next <= 11_000, `random ${r}: ${next} ms`)
  }
  t.equal(new CheckinCadence(() => 0.5).next(), 10_000, 'before the first answer the SPEC default lease (30 s) is assumed')
})

t.test('no regular delay is longer than longestRegularDelayMs, jittered or steered', async (t) => {
  t.equal(longestRegularDelayMs(30_000), 11_000)
  let now = 0
  for (const r of [0, 0.999]) {
    t.ok(new CheckinCadence(() => r).next() <= longestRegularDelayMs(30_000), `jittered, random ${r}`)
    const steered = new CheckinCadence(() => r, () => now)
    steered.setLease(30_000)
    for (let i = 0; i < 5; i++) {
      const delay = steered.next()
      t.ok(delay <= longestRegularDelayMs(30_000), `steered, random ${r}: ${delay} ms`)
      now += delay + 1_700 // answered late each time: pushed off its slot
    }
  }
})

/** A small deterministic PRNG (mulberry32): the fleet tests below must not depend on luck. */
function seeded(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

t.test('steered by a clock: on its slot a node checks in every lease/3; pushed off it, it comes back by at most 10 % a period', async (t) => {
  let now = 5_000
  const cadence = new CheckinCadence(() => 0.5, () => now)
  t.equal(cadence.next(), 10_000, 'before the lease is known: the SPEC default, unsteered')
  cadence.setLease(30_000)
  const delays: number[] = []
  for (let i = 0; i < 4; i++) {
    const d = cadence.next() // random 0.5: the slot is one period after the first answer with a lease
    delays.push(d)
    now += d
  }
  t.same(delays, [10_000, 10_000, 10_000, 10_000], 'answered on its slot: exactly lease/3')
  now += 4_000 // a storm: answered 4 s past its slot
  const back: number[] = []
  for (let i = 0; i < 6; i++) {
    const d = cadence.next()
    back.push(d)
    now += d
  }
  t.same(back, [9_000, 9_000, 9_000, 9_000, 10_000, 10_000], 'back on its slot after four periods, 1 s a period')
  now += 6_500 // 3.5 s before its next slot (6.5 s past the last)
  t.equal(cadence.next(), 11_000, 'early: the delay grows by the same 10 % at most')
  now += 11_000 + 2_000
  cadence.setLease(90_000)
  t.equal(cadence.next(), 30_000, 'a new lease draws the slot afresh over the new cycle (random 0.5: one period from now)')
  cadence.setLease(90_000)
  now += 30_000 + 5_000
  t.equal(cadence.next(), 27_000, 'the same lease again keeps the slot')
  for (const r of [0, 0.25, 0.75, 0.999]) {
    let at = 0
    const c = new CheckinCadence(() => r, () => at)
    c.setLease(30_000)
    for (let i = 0; i < 50; i++) {
      const d = c.next()
      if (d < 9_000 || d > 11_000) t.fail(`random ${r}: a delay of ${d} ms leaves lease/3 ± 10 %`)
      at += d + ((i * 7919) % 3_000) // answers that come back up to 3 s late
    }
  }
  t.pass('every steered delay stays within lease/3 ± 10 %')
})

t.test('a fleet answered all at once (a take-over) spreads back over the whole cycle within five periods when steered', async (t) => {
  const NODES = 2_000
  const PERIOD = 10_000
  /** Sends in each second of the sixth period after the storm, every answer coming at once. */
  const spreadAfterStorm = (steered: boolean): number[] => {
    const random = seeded(42)
    let now = 0
    const nodes = Array.from({ length: NODES }, () => new CheckinCadence(random, steered ? () => now : undefined))
    // they joined over a minute: each node's first answer (and its slot) somewhere in it
    const next = nodes.map((c, i) => {
      c.setLease(3 * PERIOD)
      now = (i * 60_000) / NODES
      return now + c.next()
    })
    // the storm: every node answered within the same second, then each is answered as it asks
    next.forEach((_, i) => {
      now = 100_000 + (i % 1000)
      next[i] = now + nodes[i]!.next()
    })
    const buckets = new Array<number>(10).fill(0)
    for (;;) {
      let i = 0
      for (let j = 1; j < NODES; j++) if (next[j]! < next[i]!) i = j
      now = next[i]!
      if (now >= 100_000 + 6 * PERIOD) break
      if (now >= 100_000 + 5 * PERIOD) buckets[Math.floor((now - 100_000 - 5 * PERIOD) / 1000)]! += 1
      next[i] = now + nodes[i]!.next()
    }
    return buckets
  }
  const mean = NODES / 10
  const steered = spreadAfterStorm(true)
  t.ok(Math.max(...steered) <= 1.5 * mean, `steered: at most ${Math.max(...steered)} check-ins in one second of the sixth period (mean ${mean}): ${steered.join(' ')}`)
  const random = spreadAfterStorm(false)
  t.ok(Math.max(...random) > 2 * mean, `random jitter alone still sends waves: up to ${Math.max(...random)} in one second (${random.join(' ')})`)
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
