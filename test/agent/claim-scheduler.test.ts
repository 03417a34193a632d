// Identify claim pacing on a manual clock, against a model of the controller's rules.
import t from 'tap'
import { ClaimAbortedError, ClaimScheduler, type ClaimOutcome } from '../../src/agent/claim-scheduler.js'
import { RequestBudget } from '../../src/agent/request-budget.js'
import { FakeClock } from './fake-clock.js'

interface Harness {
  readonly clock: FakeClock
  readonly scheduler: ClaimScheduler
  readonly claims: { at: number; shard: number; fresh: boolean }[]
  readonly granted: number[]
  readonly outcomes: ClaimOutcome[]
  /** Each grant's wait as onOutcome reported it, by shard. */
  readonly waited: { shard: number; ms: number }[]
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
    waited: [],
    maxInFlight: 0,
    scheduler: new ClaimScheduler({
      clock,
      budget: new RequestBudget(3, 8, () => clock.now()),
      identifyIntervalMs: 5100,
      handoffPollMs: 1000,
      claim: async (shard, fresh) => {
        inFlight += 1
        h.maxInFlight = Math.max(h.maxInFlight, inFlight)
        h.claims.push({ at: clock.now(), shard, fresh })
        await new Promise((resolve) => setImmediate(resolve))
        inFlight -= 1
        return { outcome: answer(shard, clock.now()), resume: null }
      },
      onGranted: (shard) => void h.granted.push(shard),
      onOutcome: (shard, outcome, waitedMs) => {
        h.outcomes.push(outcome)
        if (waitedMs !== null) h.waited.push({ shard, ms: waitedMs })
      },
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
    return { kind: 'granted', generation: 1, mode: 'identify' }
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
    if (!first) return { kind: 'granted', generation: 1, mode: 'identify' }
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
  const h = harness(4, (_shard, now) => (now < releasedAt ? { kind: 'wait', reason: 'handoff_pending', retryAfterMs: 30_000 - now } : { kind: 'granted', generation: 2, mode: 'identify' }))
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
  const h = harness(1, () => ({ kind: 'granted', generation: 1, mode: 'identify' }))
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
      return { kind: 'granted', generation: 1, mode: 'identify' }
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

/** Tracks a promise's fate for assertions between clock steps. */
function track(promise: Promise<unknown>) {
  const fate: { state: 'pending' | 'resolved' | 'rejected'; error: unknown } = { state: 'pending', error: null }
  promise.then(
    () => (fate.state = 'resolved'),
    (err: unknown) => {
      fate.state = 'rejected'
      fate.error = err
    },
  )
  return fate
}

t.test('a fresh claim is sent with fresh, paced by the bucket interval like any claim; each call is one grant', async (t) => {
  const h = harness(1, bucketModel(1))
  h.scheduler.setWanted([0], 1)
  await h.clock.advance(10)
  t.same(h.granted, [0], 'the start was granted')
  const first = track(h.scheduler.claimFresh(0, new AbortController().signal))
  await h.clock.advance(5000)
  t.equal(first.state, 'pending', 'not before the bucket interval after the start grant')
  t.equal(h.claims.length, 1, 'and not asked meanwhile: the interval is known')
  await h.clock.advance(200)
  t.equal(first.state, 'resolved')
  const grantedAt = h.claims[1]!.at
  const second = track(h.scheduler.claimFresh(0, new AbortController().signal))
  await h.clock.advance(grantedAt + 5099 - h.clock.now())
  t.equal(second.state, 'pending')
  await h.clock.advance(100)
  t.equal(second.state, 'resolved', 'a second call: a second grant, one interval later')
  t.same(h.claims.map((c) => c.fresh), [false, true, true], 'the fresh claims carried fresh')
  t.same(h.granted, [0], 'a fresh grant starts nothing')
  t.ok(h.clock.fired < 20, `${h.clock.fired} timers: no busy loop`)
})

t.test('a fresh claim waits as told: bucket_busy, handoff_pending, 429', async (t) => {
  for (const first of [
    { kind: 'wait', reason: 'bucket_busy', retryAfterMs: 3000 },
    { kind: 'wait', reason: 'handoff_pending', retryAfterMs: 3000 },
    { kind: 'rate_limited', retryAfterMs: 3000 },
  ] as ClaimOutcome[]) {
    let answered = false
    const h = harness(1, () => {
      if (answered) return { kind: 'granted', generation: 1, mode: 'identify' }
      answered = true
      return first
    })
    const fate = track(h.scheduler.claimFresh(0, new AbortController().signal))
    await h.clock.advance(900)
    t.equal(h.claims.length, 1, `${first.kind}: no retry before the wait`)
    await h.clock.advance(2500)
    t.equal(fate.state, 'resolved', `${first.kind}: granted after it`)
    t.ok(h.claims.length <= 4, `${first.kind}: ${h.claims.length} claims`)
  }
})

t.test('a fresh claim goes before the shards its bucket still has to start', async (t) => {
  const h = harness(1, () => ({ kind: 'granted', generation: 1, mode: 'identify' }))
  h.scheduler.setWanted([0], 1)
  await h.clock.advance(10)
  h.scheduler.setWanted([1, 2], 1)
  void h.scheduler.claimFresh(0, new AbortController().signal)
  await h.clock.advance(20_000)
  t.same(h.claims.map((c) => [c.shard, c.fresh]), [[0, false], [0, true], [1, false], [2, false]])
})

t.test('an aborted fresh claim rejects with the signal\'s reason; one in flight still paces its bucket', async (t) => {
  const h = harness(1, bucketModel(1))
  h.scheduler.setWanted([0], 1)
  await h.clock.advance(10)
  const waiting = new AbortController()
  const fate = track(h.scheduler.claimFresh(0, waiting.signal))
  await h.clock.advance(1000)
  waiting.abort(new Error('the gateway client gave up'))
  await h.clock.advance(10)
  t.equal(fate.state, 'rejected')
  t.match((fate.error as Error).message, 'the gateway client gave up')
  await h.clock.advance(10_000)
  t.equal(h.claims.length, 1, 'never sent')

  const inFlight = new AbortController()
  const late = track(h.scheduler.claimFresh(0, inFlight.signal))
  t.equal(h.claims.length, 2, 'sent at once (the interval has passed)')
  inFlight.abort(new Error('stopped'))
  await h.clock.advance(10)
  t.equal(late.state, 'rejected', 'rejected without waiting for the answer')
  h.scheduler.setWanted([1], 1)
  await h.clock.advance(5000)
  t.equal(h.claims.length, 2, "the late grant counted: the bucket's next claim waits the interval")
  await h.clock.advance(200)
  t.same(h.granted, [0, 1])

  const already = new AbortController()
  already.abort(new Error('before'))
  t.equal(track(h.scheduler.claimFresh(0, already.signal)).state, 'pending')
  await h.clock.advance(1)
  t.equal(h.claims.length, 3, 'an aborted signal sends nothing')
})

t.test('not_owner and stop() end fresh claims with ClaimAbortedError', async (t) => {
  const h = harness(2, (shard) => (shard === 0 ? { kind: 'not_owner' } : { kind: 'wait', reason: 'handoff_pending', retryAfterMs: 60_000 }))
  const notOwner = track(h.scheduler.claimFresh(0, new AbortController().signal))
  const stopped = track(h.scheduler.claimFresh(1, new AbortController().signal))
  await h.clock.advance(10)
  t.equal(notOwner.state, 'rejected')
  t.ok(notOwner.error instanceof ClaimAbortedError && notOwner.error.reason === 'not_owner', 'not_owner')
  t.equal(stopped.state, 'pending', 'waiting for a handoff')
  h.scheduler.stop()
  await h.clock.advance(10)
  t.ok(stopped.error instanceof ClaimAbortedError && stopped.error.reason === 'agent_stopped', 'agent_stopped')
  await t.rejects(h.scheduler.claimFresh(1, new AbortController().signal), ClaimAbortedError, 'a claim after stop() rejects at once')
  t.equal(h.clock.pending, 0)
})

t.test('a change of max_concurrency keeps the fresh claims waiting', async (t) => {
  const h = harness(2, () => ({ kind: 'wait', reason: 'bucket_busy', retryAfterMs: 1000 }))
  const fate = track(h.scheduler.claimFresh(3, new AbortController().signal))
  await h.clock.advance(10)
  h.scheduler.setWanted([], 4)
  await h.clock.advance(3000)
  t.equal(fate.state, 'pending')
  t.ok(h.claims.length >= 2 && h.claims.every((c) => c.shard === 3 && c.fresh), 'still claimed after the change')
})

t.test('a resume grant spends no Identify: the next shard of its bucket is claimed at once', async (t) => {
  const h = harness(1, (shard) => ({ kind: 'granted', generation: 2, mode: shard < 2 ? 'resume' : 'identify' }))
  h.scheduler.setWanted([0, 1, 2, 3], 1)
  await h.clock.advance(100)
  t.same(h.granted, [0, 1, 2], 'two resumes and an Identify without waiting')
  await h.clock.advance(5100)
  t.same(h.granted, [0, 1, 2, 3], 'the next Identify one interval after the first')
  t.ok(h.claims[3]!.at - h.claims[2]!.at >= 5100)
})

t.test('a grant reports how long its shard waited, from when it was first wanted (a re-plan keeps the start)', async (t) => {
  const h = harness(1, bucketModel(1))
  h.scheduler.setWanted([0, 1, 2], 1)
  await h.clock.advance(3000)
  h.scheduler.setWanted([1, 2], 1) // a later plan that still wants them must not restart their wait
  await h.clock.advance(20_000)
  t.same(h.granted, [0, 1, 2])
  t.same(h.waited.map((w) => w.shard), [0, 1, 2])
  const [first, second, third] = h.waited.map((w) => w.ms)
  t.ok(first! < 100, `the first shard was granted at once (${first} ms)`)
  t.ok(second! >= 5100 && second! < 5300, `the second waited one bucket interval (${second} ms)`)
  t.ok(third! >= 10_200 && third! < 10_500, `the third two (${third} ms)`)
  t.ok(h.outcomes.filter((o) => o.kind !== 'granted').length === 0, 'waits and refusals carry no wait time')
})

t.test('a fresh claim reports its wait from when the host asked', async (t) => {
  const h = harness(1, bucketModel(1))
  h.scheduler.setWanted([0], 1)
  await h.clock.advance(100)
  const fresh = h.scheduler.claimFresh(0, new AbortController().signal)
  await h.clock.advance(6000)
  await fresh
  t.equal(h.waited.length, 2)
  t.ok(h.waited[1]!.ms >= 5000 && h.waited[1]!.ms < 5200, `the fresh claim waited out the bucket interval (${h.waited[1]!.ms} ms)`)
})

t.test('a grant, queued or fresh, carries when its claim was sent, not when the answer came back', async (t) => {
  const clock = new FakeClock()
  const granted: [number, number][] = []
  const scheduler = new ClaimScheduler({
    clock,
    budget: new RequestBudget(3, 8, () => clock.now()),
    identifyIntervalMs: 5100,
    handoffPollMs: 1000,
    // A slow controller: every answer comes 400 ms after its claim (a durable write, a loaded loop).
    claim: () => new Promise((resolve) => clock.setTimeout(() => resolve({ outcome: { kind: 'granted', generation: 1, mode: 'identify' }, resume: null }), 400)),
    onGranted: (shard, _generation, _resume, claimedAt) => void granted.push([shard, claimedAt]),
    onOutcome: () => undefined,
  })
  await clock.advance(100)
  scheduler.setWanted([0], 2)
  await clock.advance(1000)
  t.same(granted, [[0, 100]], 'the start grant: sent at 100, answered at 500')
  const fresh = scheduler.claimFresh(1, new AbortController().signal)
  await clock.advance(1000)
  t.equal(await fresh, 1100, 'a fresh claim resolves to its send time')
})
