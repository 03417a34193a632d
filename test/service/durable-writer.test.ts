// The writer that times answers: an answer shows exactly the state that is (being) written, and is
// released only once that write is durable; a failed write gives 503, is retried, and heals.
import t from 'tap'
import { DurableWriter } from '../../src/service/durable-writer.js'

/** A fake state (version + value) and a store whose writes the test settles by hand. */
function setup(extra: { retryMinMs?: number; retryMaxMs?: number } = {}) {
  const state = { version: 0, value: 0, stale: false, settles: 0 }
  const writes: Array<{ value: number; whole: boolean; resolve(): void; reject(err: Error): void }> = []
  const failures: number[] = []
  let recovered = 0
  const writer = new DurableWriter({
    ...extra,
    settle: () => {
      state.settles += 1
      if (state.stale) {
        state.stale = false
        state.value += 100 // the deferred re-plan
        state.version += 1
      }
    },
    version: () => state.version,
    write: (whole) => new Promise<void>((resolve, reject) => writes.push({ value: state.value, whole, resolve, reject })),
    onFailure: (_e, n) => failures.push(n),
    onRecovered: (n) => (recovered = n),
  })
  const change = (value: number) => {
    state.value = value
    state.version += 1
  }
  return { state, writes, writer, change, failures, recovered: () => recovered }
}
const tick = () => new Promise((r) => setImmediate(r))

/** Waits until `check()` holds (a timer's write on a loaded machine may come well after its interval). */
async function eventually(check: () => boolean, timeoutMs = 5000): Promise<boolean> {
  const end = performance.now() + timeoutMs
  while (!check() && performance.now() < end) await new Promise((r) => setTimeout(r, 5))
  return check()
}

t.test('nothing pending: the answer comes at once, without a write', async (t) => {
  const { writer, writes } = setup()
  t.equal(await writer.answer(() => 'now'), 'now')
  t.equal(writes.length, 0)
})

t.test('answers wait for the write of the state they show; changes during a write are written together next', async (t) => {
  const { state, writer, writes, change } = setup()
  change(1)
  const first = writer.answer(() => state.value)
  await tick()
  t.equal(writes.length, 1, 'one write under way')
  t.equal(writes[0]!.value, 1)
  change(2)
  const second = writer.answer(() => state.value)
  change(3)
  const third = writer.answer(() => state.value)
  let released = false
  void first.then(() => (released = true))
  await tick()
  t.equal(released, false, 'not released before its write is durable')
  t.equal(writes.length, 1, 'no second write while one is under way')
  writes[0]!.resolve()
  t.equal(await first, 1, 'shows the state of its write')
  await tick()
  t.equal(writes.length, 2, 'then one write for both later changes')
  t.equal(writes[1]!.value, 3)
  writes[1]!.resolve()
  t.same(await Promise.all([second, third]), [3, 3], 'both show the state that was written (not an older, not a newer one)')
})

t.test('a deferred re-plan is settled once for every answer queued meanwhile', async (t) => {
  const { state, writer, writes, change } = setup()
  change(1)
  const a = writer.answer(() => state.value)
  await tick()
  state.stale = true // two joins arrive during the write
  const b = writer.answer(() => state.value, true)
  const c = writer.answer(() => state.value, true)
  writes[0]!.resolve()
  await a
  await tick()
  t.equal(writes.length, 2)
  t.equal(writes[1]!.value, 101, 'one re-plan for both')
  writes[1]!.resolve()
  t.same(await Promise.all([b, c]), [101, 101])
})

t.test('a failure: 503 to waiters and new work, retried, healed by the first success', async (t) => {
  const { state, writer, writes, change, failures, recovered } = setup({ retryMinMs: 10, retryMaxMs: 40 })
  change(1)
  const waiting = writer.answer(() => state.value)
  await tick()
  writes[0]!.reject(new Error('EIO'))
  await t.rejects(waiting, { code: 'unavailable', statusCode: 503 }, 'the waiting answer gets 503')
  t.throws(() => writer.assertAvailable(), { code: 'unavailable' }, 'new work is refused')
  await t.rejects(writer.answer(() => 1), { code: 'unavailable' }, 'a new answer is refused at once')
  t.equal(writer.failure?.message, 'EIO')
  t.ok(await eventually(() => writes.length === 2), 'retried after the backoff, although nothing changed since')
  t.equal(writes[0]!.whole, false, 'a normal write is a delta')
  t.equal(writes[1]!.whole, true, 'the retry writes the whole state (the failed delta is lost)')
  writes[1]!.reject(new Error('EIO again'))
  t.ok(await eventually(() => writes.length === 3), 'retried again (backoff doubled)')
  change(2)
  writes[2]!.resolve()
  await tick()
  await tick()
  t.same(failures, [1, 2])
  t.equal(recovered(), 2, 'recovery reported with the number of failed writes')
  t.equal(writer.failing, false)
  t.doesNotThrow(() => writer.assertAvailable(), 'serving again')
  t.equal(writes.length, 4, 'the change made meanwhile is written next')
  t.equal(writes[3]!.whole, false, 'as a delta again')
  writes[3]!.resolve()
  t.equal(await writer.answer(() => state.value), 2)
})

t.test('a store that throws at the call (not a rejected promise) fails the round the same way', async (t) => {
  const state = { version: 0 }
  let calls = 0
  const failures: string[] = []
  const writer = new DurableWriter({
    settle: () => {},
    version: () => state.version,
    write: () => {
      calls += 1
      if (calls === 1) throw new Error('too large for one transaction')
      return Promise.resolve()
    },
    onFailure: (err) => failures.push(err.message),
    retryMinMs: 10,
  })
  state.version = 1
  await t.rejects(writer.answer(() => 'a'), { code: 'unavailable' }, 'the waiting answer gets 503')
  t.same(failures, ['too large for one transaction'])
  t.ok(await eventually(() => calls === 2), 'retried')
  t.equal(await writer.answer(() => 'b'), 'b', 'healed')
})

t.test('flushFinal writes the latest state, also after failures, and throws if that fails', async (t) => {
  let fail = true
  let count = 0
  const w = new DurableWriter({ settle: () => undefined, version: () => 1, write: async () => { count++; if (fail) throw new Error('EIO') }, retryMinMs: 10_000 })
  w.kick()
  await tick()
  t.equal(w.failing, true)
  await t.rejects(w.flushFinal(), /EIO/)
  fail = false
  await w.flushFinal()
  t.equal(w.failing, false)
  t.equal(count, 3)
  await w.flushFinal()
  t.equal(count, 4, 'always writes once more (a fresh controller leaves its state file too)')
})

t.test('an answer asked right after a loop that had nothing to write is never left waiting for a timer', async (t) => {
  const { writer, state } = setup()
  const timeout = () => new Promise((r) => setTimeout(() => r('stuck'), 200))
  writer.kick() // nothing to write: the loop ends at once
  t.equal(await Promise.race([writer.answer(() => 'now'), timeout()]), 'now')
  writer.kick()
  t.equal(await Promise.race([writer.answer(() => state.value, true), timeout()]), 0, 'also when it asks for a settle')
})

t.test('rounds that re-plan are spaced by settleIntervalMs; other rounds are not', async (t) => {
  const state = { version: 0, stale: false, replans: 0 }
  const writtenAt: number[] = []
  const writer = new DurableWriter({
    settle: () => {
      if (!state.stale) return
      state.stale = false
      state.replans += 1
      state.version += 1
    },
    needsSettle: () => state.stale,
    settleIntervalMs: 150,
    version: () => state.version,
    write: async () => void writtenAt.push(performance.now()),
  })
  const join = () => {
    state.stale = true
    return writer.answer(() => state.replans, true)
  }
  const t0 = performance.now()
  t.equal(await join(), 1, 'the first re-plan is not held back')
  t.ok(performance.now() - t0 < 100, 'answered at once')
  const t1 = performance.now()
  const joins = [join(), join(), join()]
  t.same(await Promise.all(joins), [2, 2, 2], 'joins arriving within the interval share one re-plan')
  t.ok(performance.now() - t1 >= 120, `the second re-plan waited for the interval (${(performance.now() - t1).toFixed(0)} ms)`)
  // A change that needs no re-plan is written at once, even right after a re-plan.
  const t2 = performance.now()
  state.version += 1
  await writer.answer(() => 0)
  t.ok(performance.now() - t2 < 100, 'a change without a re-plan is not held back')
  t.equal(writtenAt.length, 3)
})

t.test('an abandoned writer does not write after the re-plan interval', async (t) => {
  const state = { version: 0, stale: false }
  let writes = 0
  const writer = new DurableWriter({
    settle: () => {
      if (state.stale) (state.stale = false), (state.version += 1)
    },
    needsSettle: () => state.stale,
    settleIntervalMs: 100,
    version: () => state.version,
    write: async () => void (writes += 1),
  })
  state.stale = true
  await writer.answer(() => 0, true)
  state.stale = true
  const held = writer.answer(() => 0, true)
  writer.abandon()
  await t.rejects(held, { code: 'unavailable' })
  await new Promise((r) => setTimeout(r, 150))
  t.equal(writes, 1, 'nothing written once abandoned')
})

t.test('a group commit: changes made in the same turn of the event loop share one write, even with a store that writes synchronously', async (t) => {
  const state = { version: 0 }
  const written: number[] = []
  // As the file store: the whole write happens inside the call.
  const writer = new DurableWriter({ settle: () => {}, version: () => state.version, write: () => (written.push(state.version), Promise.resolve()) })
  const answers: Promise<number>[] = []
  for (let i = 1; i <= 50; i++) {
    state.version = i
    answers.push(writer.answer(() => i))
  }
  t.same(written, [], 'nothing written inside the requests')
  t.same(await Promise.all(answers), Array.from({ length: 50 }, (_, i) => i + 1), 'every answer released')
  t.same(written, [50], 'one write for the 50 changes')
  state.version = 51
  await writer.answer(() => 51)
  t.same(written, [50, 51], 'a change in a later turn gets a write of its own')
})

t.test('a round releases at most maxAnswersPerRound answers, with turns of the event loop between; operators first', async (t) => {
  const state = { version: 0 }
  const writes: Array<{ version: number; resolve(): void }> = []
  const writer = new DurableWriter({
    settle: () => {},
    version: () => state.version,
    write: () => new Promise<void>((resolve) => writes.push({ version: state.version, resolve })),
    maxAnswersPerRound: 1000,
  })
  let durable = 0
  const log: string[] = []
  let released = 0
  /** An answer that records when it was released, and checks that the state it shows was durable then. */
  const ask = (label: string, urgent = false) =>
    writer
      .answer(() => state.version, false, urgent)
      .then((v) => {
        if (v > durable) t.fail(`${label} shows version ${v} before it was durable (${durable})`)
        released += 1
        if (label.startsWith('operator')) log.push(`${label} after ${released - 1}`)
        return v
      })
  state.version = 1
  const answers = Array.from({ length: 2500 }, (_, i) => ask(`node ${i}`))
  answers.push(ask('operator drain', true))
  await tick()
  t.equal(writes.length, 1, 'one write for all of it')
  // the loop turns between rounds: a timer set now fires between the releases, not after all of them
  const turns: number[] = []
  const timer = setInterval(() => turns.push(released), 0)
  durable = 1
  writes[0]!.resolve()
  await Promise.all(answers)
  clearInterval(timer)
  t.same(log, ['operator drain after 0'], 'the operator answer came first, though asked last')
  t.ok(turns.some((n) => n > 0 && n < 2501), `timers ran while the answers were being released (released so far at each: ${[...new Set(turns)].join(', ')})`)
  t.equal(writes.length, 1, 'no further write: nothing changed')

  // a change between rounds: the next round writes it first, and answers show the new state
  state.version = 2
  const more = Array.from({ length: 1500 }, (_, i) => ask(`late ${i}`))
  state.version = 3
  await tick()
  t.equal(writes.length, 2)
  durable = 3
  writes[1]!.resolve()
  t.same(new Set(await Promise.all(more)), new Set([3]), 'every answer shows the state that was written')
})

t.test('maxAnswersPerRound must be a whole number of at least 1: anything else would answer nobody', async (t) => {
  const opts = { settle: () => {}, version: () => 0, write: () => Promise.resolve() }
  for (const bad of [0, -1, 1.5, Number.NaN]) t.throws(() => new DurableWriter({ ...opts, maxAnswersPerRound: bad }), RangeError, String(bad))
  t.doesNotThrow(() => new DurableWriter({ ...opts, maxAnswersPerRound: 1 }))
})

/** A state with background changes (`backlog`: reported generations) beside the ones answers wait for. */
function backlogSetup(extra: { backlogIntervalMs?: number; maxBacklogPerWrite?: number; retryMinMs?: number } = {}) {
  const state = { version: 0, value: 0, backlog: 0 }
  const writes: Array<{ value: number; whole: boolean; backlog: number; resolve(): void; reject(err: Error): void }> = []
  const writer = new DurableWriter({
    ...extra,
    settle: () => undefined,
    version: () => state.version,
    backlog: () => state.backlog,
    write: (whole, backlog) =>
      new Promise<void>((resolve, reject) => {
        state.backlog -= Math.min(state.backlog, backlog) // taken at the call, as the controller's takeDelta does
        writes.push({ value: state.value, whole, backlog, resolve, reject })
      }),
  })
  const change = (value: number) => {
    state.value = value
    state.version += 1
  }
  return { state, writes, writer, change }
}

t.test('background changes hold no answer back and are written in the background, a bounded number per write', async (t) => {
  const { state, writes, writer } = backlogSetup({ backlogIntervalMs: 40, maxBacklogPerWrite: 3 })
  state.backlog = 5
  t.equal(await writer.answer(() => 'now'), 'now', 'nothing an answer waits for: answered at once')
  writer.kick()
  await tick()
  t.equal(writes.length, 1, 'a write of background changes only')
  t.match(writes[0], { whole: false, backlog: 3 }, 'at most maxBacklogPerWrite of them')
  t.equal(state.backlog, 2)
  t.equal(await writer.answer(() => 'meanwhile'), 'meanwhile', 'an answer asked during that write needs nothing it carries: at once (an etcd election can hold a write for seconds)')
  writes[0]!.resolve()
  await tick()
  await tick()
  t.equal(writes.length, 1, 'the rest waits for the interval')
  t.ok(await eventually(() => writes.length === 2), 'then comes without any request kicking')
  t.match(writes[1], { whole: false, backlog: 2 })
  writes[1]!.resolve()
  await new Promise((r) => setTimeout(r, 80))
  t.equal(writes.length, 2, 'nothing left: no more writes')
})

t.test("an operator's answer waits for no background change; nodes' answers may carry some", async (t) => {
  const { state, writes, writer, change } = backlogSetup({ backlogIntervalMs: 0, maxBacklogPerWrite: 100 })
  state.backlog = 50
  change(1)
  const drain = writer.answer(() => state.value, false, true)
  await tick()
  t.match(writes[0], { value: 1, backlog: 0 }, 'the drain write carries only what answers wait for')
  writes[0]!.resolve()
  t.equal(await drain, 1)
  await tick()
  t.match(writes[1], { backlog: 50 }, 'the background follows')
  writes[1]!.resolve()
  await tick()
  state.backlog = 10
  change(2)
  const node = writer.answer(() => state.value)
  await tick()
  t.match(writes[2], { value: 2, backlog: 10 }, 'a node answer due anyway carries the background along')
  writes[2]!.resolve()
  t.equal(await node, 2)
})

/** Lets the writer's promise continuations run, without a turn of the event loop. */
async function microtasks(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve()
}

t.test("an operator's answer waiting as a write ends: its write starts before that write's answers are sent", async (t) => {
  const { state, writes, writer, change } = setup()
  change(1)
  const sent: number[] = []
  const nodes = [0, 1, 2].map((i) => writer.answer(() => state.value).then((v) => (sent.push(i), v)))
  await tick()
  t.equal(writes.length, 1)
  change(2) // the drain, during the nodes' write
  let drained: number | null = null
  const drain = writer.answer(() => state.value, false, true).then((v) => (drained = v))
  writes[0]!.resolve()
  await microtasks()
  t.equal(writes.length, 2, "the operator's write started as the nodes' write ended")
  t.equal(writes[1]!.value, 2)
  t.same(sent, [], "the nodes' answers not sent yet: they would have held the drain's write back")
  await tick()
  t.same(sent, [0, 1, 2], "sent, in order, while the operator's write is in flight")
  t.same(await Promise.all(nodes), [1, 1, 1], 'each shows the state of its own write')
  t.equal(drained, null, "the operator's answer still waits for its write")
  writes[1]!.resolve()
  await drain
  t.equal(drained, 2)
})

t.test("with a store that writes within the call, held answers still go first, then the operator's", async (t) => {
  const state = { version: 0 }
  const pending: Array<() => void> = []
  let calls = 0
  const writer = new DurableWriter({
    settle: () => {},
    version: () => state.version,
    // the first write waits for the test; later ones (the operator's) are done within the call
    write: () => (++calls === 1 ? new Promise<void>((resolve) => pending.push(resolve)) : Promise.resolve()),
  })
  const order: string[] = []
  state.version = 1
  const nodes = [0, 1, 2].map((i) => writer.answer(() => state.version).then((v) => (order.push(`node ${i}`), v)))
  await tick()
  state.version = 2
  const drain = writer.answer(() => state.version, false, true).then((v) => (order.push('drain'), v))
  pending[0]!()
  t.same(await Promise.all(nodes), [1, 1, 1])
  t.equal(await drain, 2)
  t.same(order, ['node 0', 'node 1', 'node 2', 'drain'], 'the older answers first')
  t.equal(calls, 2)
})

t.test("answers held for an operator's write are sent even when that write fails", async (t) => {
  const { state, writes, writer, change } = setup({ retryMinMs: 60_000 })
  change(1)
  const node = writer.answer(() => state.value)
  await tick()
  change(2)
  const drain = writer.answer(() => state.value, false, true)
  writes[0]!.resolve()
  await microtasks()
  t.equal(writes.length, 2)
  writes[1]!.reject(new Error('etcd went away'))
  t.equal(await node, 1, 'durable before the failure: answered')
  await t.rejects(drain, { code: 'unavailable' }, 'the failed write: 503')
  writer.abandon()
})

t.test("answers held for an operator's write wait for no re-plan interval", async (t) => {
  const state = { version: 0, stale: false, value: 0 }
  const writes: Array<{ value: number; resolve(): void }> = []
  const writer = new DurableWriter({
    settle: () => {
      if (!state.stale) return
      state.stale = false
      state.value += 100
      state.version += 1
    },
    needsSettle: () => state.stale,
    settleIntervalMs: 200,
    version: () => state.version,
    write: () => new Promise<void>((resolve) => writes.push({ value: state.value, resolve })),
  })
  state.stale = true // a join: the first round re-plans
  let nodeSent = false
  const node = writer.answer(() => state.value, true).then((v) => ((nodeSent = true), v))
  await tick()
  t.equal(writes.length, 1)
  state.stale = true // another join, and a drain: the operator's round must wait for the re-plan interval
  const drain = writer.answer(() => state.value, true, true)
  writes[0]!.resolve()
  await microtasks()
  t.equal(nodeSent, true, "the node's answer is sent, not held while the operator's round waits for the interval")
  t.equal(await node, 100)
  t.equal(writes.length, 1, 'the interval has not passed')
  t.ok(await eventually(() => writes.length === 2), 'then the re-plan and the write')
  writes[1]!.resolve()
  t.equal(await drain, 200)
})

t.test('a whole write (a retry after a failure, the final flush) carries every background change', async (t) => {
  const { state, writes, writer, change } = backlogSetup({ backlogIntervalMs: 60_000, maxBacklogPerWrite: 3, retryMinMs: 5 })
  state.backlog = 10
  writer.kick()
  await tick()
  t.match(writes[0], { whole: false, backlog: 3 })
  writes[0]!.resolve()
  await tick()
  change(1)
  const waiting = writer.answer(() => state.value)
  await tick()
  t.match(writes[1], { whole: false, backlog: 0 }, 'within the interval: none')
  writes[1]!.reject(new Error('EIO'))
  await t.rejects(waiting, { code: 'unavailable' })
  await eventually(() => writes.length === 3)
  t.match(writes[2], { whole: true, backlog: Number.POSITIVE_INFINITY }, 'the retry writes the whole state, background and all')
  writes[2]!.resolve()
  await tick()
  state.backlog = 4
  const final = writer.flushFinal()
  await tick()
  t.match(writes[3], { whole: true, backlog: Number.POSITIVE_INFINITY }, 'so does the final flush')
  writes[3]!.resolve()
  await final
})

t.test('maxBacklogPerWrite must be a whole number of at least 1', async (t) => {
  const opts = { settle: () => {}, version: () => 0, write: () => Promise.resolve() }
  for (const bad of [0, -1, 1.5, Number.NaN]) t.throws(() => new DurableWriter({ ...opts, maxBacklogPerWrite: bad }), RangeError, String(bad))
  t.doesNotThrow(() => new DurableWriter({ ...opts, maxBacklogPerWrite: 1 }))
})

t.test('an abandoned writer writes no background change', async (t) => {
  const { state, writes, writer } = backlogSetup({ backlogIntervalMs: 30 })
  state.backlog = 5
  writer.kick()
  await tick()
  writes[0]!.resolve()
  await tick()
  state.backlog = 5
  writer.kick()
  await tick()
  writer.abandon()
  await new Promise((r) => setTimeout(r, 80))
  t.equal(writes.length, 1)
})

t.test('a change made during a background-only write is answered after its own write', async (t) => {
  const { state, writes, writer, change } = backlogSetup({ backlogIntervalMs: 60_000 })
  state.backlog = 2
  writer.kick()
  await tick()
  t.match(writes[0], { backlog: 2 })
  change(7)
  let answered = false
  const waiting = writer.answer(() => state.value).then((v) => ((answered = true), v))
  await tick()
  t.equal(answered, false, 'not released from memory: its change is not durable')
  writes[0]!.resolve()
  await tick()
  await tick()
  t.match(writes[1], { value: 7, backlog: 0 }, 'its own write follows')
  t.equal(answered, false)
  writes[1]!.resolve()
  t.equal(await waiting, 7)
})

t.test('a failed background-only write refuses nothing; the whole state is written after the interval', async (t) => {
  const failures: number[] = []
  const state = { version: 0, backlog: 3 }
  const writes: Array<{ whole: boolean; backlog: number; resolve(): void; reject(err: Error): void }> = []
  const writer = new DurableWriter({
    settle: () => undefined,
    version: () => state.version,
    backlog: () => state.backlog,
    backlogIntervalMs: 40,
    write: (whole, backlog) =>
      new Promise<void>((resolve, reject) => {
        state.backlog -= Math.min(state.backlog, backlog)
        writes.push({ whole, backlog, resolve, reject })
      }),
    onBackgroundFailure: (_err, n) => failures.push(n),
    onFailure: () => t.fail('not a failure that refuses work'),
  })
  writer.kick()
  await tick()
  writes[0]!.reject(new Error('etcd: deadline exceeded'))
  await tick()
  await tick()
  t.same(failures, [1], 'reported as a background failure')
  t.equal(writer.failing, false, 'not failing: nothing an answer showed was lost')
  t.doesNotThrow(() => writer.assertAvailable(), 'new work is taken')
  t.equal(await writer.answer(() => 'served'), 'served', 'answers come at once')
  t.equal(state.backlog, 0, 'its reports are gone from the deltas')
  await eventually(() => writes.length === 2)
  t.match(writes[1], { whole: true }, 'so after the interval the whole state is written, with no report pending')
  writes[1]!.reject(new Error('still down'))
  await eventually(() => writes.length === 3)
  t.same(failures, [1, 2])
  t.match(writes[2], { whole: true }, 'and again, one interval later')
  writes[2]!.resolve()
  await new Promise((r) => setTimeout(r, 80))
  t.equal(writes.length, 3, 'written: nothing more')
})
