import t from 'tap'
import { AppError } from '../../src/errors.js'
import { DurableWriter } from '../../src/service/durable-writer.js'

/** A write function whose calls the test settles by hand; `state` is what a write would snapshot. */
function controllableStore() {
  const calls: Array<{ snapshot: number; resolve(): void; reject(err: Error): void }> = []
  let state = 0
  const write = () => new Promise<void>((resolve, reject) => calls.push({ snapshot: state, resolve, reject }))
  return { calls, write, set: (v: number) => (state = v) }
}
const tick = () => new Promise((r) => setImmediate(r))

t.test('one write at a time, always of the latest state; answers wait for the write covering them', async (t) => {
  const store = controllableStore()
  const w = new DurableWriter({ write: store.write })
  store.set(1)
  w.changed()
  const first = w.whenDurable()
  store.set(2)
  w.changed()
  store.set(3)
  w.changed()
  const second = w.whenDurable()
  t.equal(store.calls.length, 1, 'no second write while one is under way')
  let firstDone = false
  void first.then(() => (firstDone = true))
  store.calls[0]!.resolve()
  await first
  t.ok(firstDone)
  await tick()
  t.equal(store.calls.length, 2, 'then one write for both later changes')
  t.equal(store.calls[1]!.snapshot, 3, 'of the latest state')
  store.calls[1]!.resolve()
  await second
  await w.whenDurable() // nothing pending: resolves at once
})

t.test('a failure: 503 to waiters and new work, retried with the latest state, healed by the first success', async (t) => {
  const store = controllableStore()
  const failures: number[] = []
  let recovered = 0
  const w = new DurableWriter({ write: store.write, retryMinMs: 10, retryMaxMs: 40, onFailure: (_e, n) => failures.push(n), onRecovered: (n) => (recovered = n) })
  store.set(1)
  w.changed()
  const waiting = w.whenDurable()
  store.calls[0]!.reject(new Error('EIO'))
  await t.rejects(waiting, new AppError('unavailable', 'x').constructor, 'the waiting answer gets an AppError')
  await waiting.catch((err: AppError) => t.equal(err.code, 'unavailable'))
  t.throws(() => w.assertAvailable(), { code: 'unavailable' }, 'new work is refused')
  t.equal(w.failing, true)
  await t.rejects(w.whenDurable(), { code: 'unavailable' }, 'a new waiter is refused at once')
  store.set(2)
  w.changed()
  t.equal(store.calls.length, 1, 'no write outside the retry schedule')
  await new Promise((r) => setTimeout(r, 30))
  t.equal(store.calls.length, 2, 'retried after the backoff')
  t.equal(store.calls[1]!.snapshot, 2, 'with the latest state')
  store.calls[1]!.reject(new Error('EIO again'))
  await new Promise((r) => setTimeout(r, 60))
  t.equal(store.calls.length, 3, 'retried again (backoff doubled)')
  store.calls[2]!.resolve()
  await tick()
  t.same(failures, [1, 2])
  t.equal(recovered, 2, 'recovery reported with the number of failed writes')
  t.equal(w.failing, false)
  t.doesNotThrow(() => w.assertAvailable(), 'serving again')
  await w.whenDurable()
})

t.test('flushFinal writes the latest state, also after failures, and throws if that fails', async (t) => {
  let fail = true
  let writes = 0
  const w = new DurableWriter({ write: async () => { writes++; if (fail) throw new Error('EIO') }, retryMinMs: 10_000 })
  w.changed()
  await tick()
  t.equal(w.failing, true)
  await t.rejects(w.flushFinal(), /EIO/)
  fail = false
  await w.flushFinal()
  t.equal(w.failing, false)
  t.equal(writes, 3)
  await w.flushFinal()
  t.equal(writes, 4, 'always writes once more (a fresh controller leaves its state file too)')
})
