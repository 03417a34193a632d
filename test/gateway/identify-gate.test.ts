// The emulator's IDENTIFY limits on their own, with the time as a parameter: bucket windows
// (shard_id % max_concurrency) and the session start budget with its reset.
import t from 'tap'
import { IdentifyGate } from '../support/gateway/identify-gate.js'

t.test('one IDENTIFY per bucket per window; a refused one does not restart the window', async (t) => {
  const gate = new IdentifyGate(4, 5000, 1000, 1000, 86_400_000, 0)
  t.same(gate.check(0, 0), { ok: true })
  gate.accept(0, 0)
  t.same(gate.check(4, 100), { ok: false, reason: 'bucket', previousAt: 0 }, 'shard 4 is bucket 0 too')
  t.same(gate.check(1, 100), { ok: true }, 'another bucket')
  t.same(gate.check(8, 4999), { ok: false, reason: 'bucket', previousAt: 0 })
  t.same(gate.check(8, 5000), { ok: true }, 'the window is measured from the accepted IDENTIFY')
})

t.test('the session start budget: spent by accepted IDENTIFYs, refilled to total after reset_after', async (t) => {
  const gate = new IdentifyGate(1, 0, 3, 1, 1000, 0)
  t.same(gate.limit(0), { total: 3, remaining: 1, reset_after: 1000, max_concurrency: 1 })
  gate.accept(0, 10)
  t.same(gate.check(0, 20), { ok: false, reason: 'limit' })
  t.equal(gate.limit(999).remaining, 0)
  t.same(gate.check(0, 1000), { ok: true })
  t.same(gate.limit(1000), { total: 3, remaining: 3, reset_after: 86_400_000, max_concurrency: 1 })
})
