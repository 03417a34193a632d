// Identify claim pacing on a manual clock, against a model of the controller's rules.
import t from 'tap'
import { ClaimScheduler, type ClaimOutcome } from '../../src/agent/claim-scheduler.js'
import { RequestBudget } from '../../src/agent/request-budget.js'
import { FakeClock } from './fake-clock.js'

interface Harness {
  readonly clock: FakeClock
  readonly scheduler: ClaimScheduler
  readonly claims: { at: number; shard: number }[]
  readonly granted: number[]
  readonly outcomes: ClaimOutcome[]
  maxInFlight: number
}

/** A scheduler whose claims are answered by `answer` after a short round trip. */
function harness(maxConcurrency: number, answer: (shard: number, now: number) => ClaimOutcome): Harness {
  const clock = new FakeClock()
  let inFlight = 0
  const h: Harness = {
    clock,
    claims: [],
    granted: [],
    outcomes: [],
    maxInFlight: 0,
    scheduler: new ClaimScheduler({
      clock,
      budget: new RequestBudget(3, 8, () => clock.now()),
      identifyIntervalMs: 5100,
      handoffPollMs: 1000,
      claim: async (shard) => {
        inFlight += 1
        h.maxInFlight = Math.max(h.maxInFlight, inFlight)
        h.claims.push({ at: clock.now(), shard })
        await new Promise((resolve) => setImmediate(resolve))
        inFlight -= 1
        return answer(shard, clock.now())
      },
      onGranted: (shard) => void h.granted.push(shard),
      onOutcome: (_shard, outcome) => void h.outcomes.push(outcome),
    }),
  }
  return h
}

/** The controller's bucket rule: one grant per bucket per 5000 ms. */
function bucketModel(maxConcurrency: number, intervalMs = 5000) {
  const last = new Map<number, number>()
  return (shard: number, now: number): ClaimOutcome => {
    const bucket = shard % maxConcurrency
    const prev = last.get(bucket)
    if (prev !== undefined && now - prev < intervalMs) return { kind: 'wait', reason: 'bucket_busy', retryAfterMs: prev + intervalMs - now }
    last.set(bucket, now)
    return { kind: 'granted', generation: 1 }
  }
}

t.test('128 shards in 16 buckets: one claim at a time, inside the request budget, one grant per bucket per interval', async (t) => {
  const h = harness(16, bucketModel(16))
  h.scheduler.setWanted(Array.from({ length: 128 }, (_, i) => i), 16)
  await h.clock.advance(60_000)
  t.equal(h.granted.length, 128, 'every shard granted')
  t.equal(h.maxInFlight, 1, 'never two claims in flight')
  t.equal(h.claims.length, 128, 'no claim was wasted on a busy bucket')
  const perWindow = Math.max(...h.claims.map((c) => h.claims.filter((d) => d.at >= c.at && d.at < c.at + 1000).length))
  t.ok(perWindow <= 8 + 3, `at most the burst plus one second of budget in any second (saw ${perWindow}; the controller allows 5/s, burst 20)`)
  const grantsByBucket = new Map<number, number[]>()
  h.claims.forEach((c) => grantsByBucket.set(c.shard % 16, [...(grantsByBucket.get(c.shard % 16) ?? []), c.at]))
  const gaps = [...grantsByBucket.values()].flatMap((times) => times.slice(1).map((at, i) => at - times[i]!))
  t.ok(Math.min(...gaps) >= 5000, 'grants in one bucket at least the interval apart')
  t.ok(h.clock.fired < 400, `timers fired ${h.clock.fired} times: no busy loop`)
  t.equal(h.clock.pending, 0, 'nothing left scheduled')
})

t.test('bucket_busy: the next claim in that bucket waits retry_after_ms', async (t) => {
  let first = true
  const h = harness(1, () => {
    if (!first) return { kind: 'granted', generation: 1 }
    first = false
    return { kind: 'wait', reason: 'bucket_busy', retryAfterMs: 3000 }
  })
  h.scheduler.setWanted([0], 1)
  await h.clock.advance(2999)
  t.equal(h.claims.length, 1, 'nothing before retry_after_ms')
  await h.clock.advance(100)
  t.equal(h.claims.length, 2)
  t.ok(h.claims[1]!.at >= 3000, 'the retry came after retry_after_ms')
  t.same(h.granted, [0])
})

t.test('handoff_pending: one waiting bucket probed per poll interval, then all retried once the handoff is released', async (t) => {
  const releasedAt = 2500
  const h = harness(4, (_shard, now) => (now < releasedAt ? { kind: 'wait', reason: 'handoff_pending', retryAfterMs: 30_000 - now } : { kind: 'granted', generation: 2 }))
  h.scheduler.setWanted([0, 1, 2, 3], 4)
  await h.clock.advance(500)
  t.equal(h.claims.length, 4, 'each bucket asked once')
  await h.clock.advance(1900)
  t.equal(h.claims.length, 6, 'then one probe a second, not one per bucket')
  await h.clock.advance(1000)
  t.same([...h.granted].sort(), [0, 1, 2, 3], 'granted soon after the release, long before retry_after_ms')
  t.ok(h.claims.length <= 10, `${h.claims.length} claims in all`)
})

t.test('not_owner: the shard is dropped and never started', async (t) => {
  const h = harness(1, () => ({ kind: 'not_owner' }))
  h.scheduler.setWanted([0], 1)
  await h.clock.advance(60_000)
  t.equal(h.claims.length, 1, 'asked once, never again')
  t.same(h.granted, [])
  t.same(h.scheduler.pending, [])
})

t.test('a shard removed from the wanted set while its claim is in flight is not started', async (t) => {
  const h = harness(1, () => ({ kind: 'granted', generation: 1 }))
  h.scheduler.setWanted([0], 1)
  t.equal(h.claims.length, 1, 'claimed at once')
  h.scheduler.setWanted([], 1)
  await h.clock.advance(10)
  t.same(h.granted, [], 'the grant is not passed on')
})

t.test('429 and daily_limit pause every bucket for the time given', async (t) => {
  for (const outcome of [{ kind: 'rate_limited', retryAfterMs: 4000 }, { kind: 'wait', reason: 'daily_limit', retryAfterMs: 4000 }] as ClaimOutcome[]) {
    let first = true
    const h = harness(4, (shard) => {
      if (first) {
        first = false
        return outcome
      }
      return { kind: 'granted', generation: 1 }
    })
    h.scheduler.setWanted([0, 1, 2, 3], 4)
    await h.clock.advance(3999)
    t.equal(h.claims.length, 1, `${outcome.kind}: no other bucket claimed meanwhile`)
    await h.clock.advance(2000)
    t.equal(h.granted.length, 4, `${outcome.kind}: all granted after the pause`)
  }
})

t.test('failures back off instead of retrying at once', async (t) => {
  const h = harness(1, () => ({ kind: 'failed', detail: 'unreachable' }))
  h.scheduler.setWanted([0], 1)
  await h.clock.advance(30_000)
  t.ok(h.claims.length <= 8, `${h.claims.length} attempts in 30 s`)
  h.scheduler.stop()
  await h.clock.advance(30_000)
  const after = h.claims.length
  await h.clock.advance(30_000)
  t.equal(h.claims.length, after, 'nothing after stop()')
  t.equal(h.clock.pending, 0)
})
