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
