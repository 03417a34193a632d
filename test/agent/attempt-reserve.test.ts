// The time an agent keeps back for a retry to be answered before its fail-safe: 4.5 s where the lease
// allows (a controller admits a returning node into a queue of up to twice its 2 s budget), and a short
// lease still keeps slack to spread its retries over, within an attempt's own timeout (lease/3).
import t from 'tap'
import { defaultStopMarginMs, defaultStopTimeoutMs } from '../../src/agent/agent-options.js'
import { ATTEMPT_RESERVE_MS, attemptReserveMs } from '../../src/agent/node-agent.js'

t.test('4.5 s at the default lease, never below the earlier 2 s, never more than lease/6 above it', async (t) => {
  t.equal(attemptReserveMs(30_000), ATTEMPT_RESERVE_MS, 'lease 30 s: 4.5 s')
  t.equal(attemptReserveMs(3_600_000), ATTEMPT_RESERVE_MS, 'a long lease: still 4.5 s')
  t.equal(attemptReserveMs(24_000), 4000, 'lease 24 s: lease/6')
  t.equal(attemptReserveMs(12_000), 2000, 'lease 12 s: 2 s')
  t.equal(attemptReserveMs(8_000), 2000, 'lease 8 s: 2 s, as before the reserve was raised')
})

t.test('at the first failed check-in a node still has slack to spread its retries over (lease 8 s and up)', async (t) => {
  for (const leaseS of [8, 9, 12, 15, 20, 30, 60, 300]) {
    const lease = leaseS * 1000
    const failSafeAfterRenewal = lease - defaultStopTimeoutMs(lease) - defaultStopMarginMs(lease)
    // the latest a regular check-in goes: lease/3 + 10 % jitter after the last renewal (cadence.ts)
    const slack = failSafeAfterRenewal - 1.1 * (lease / 3) - attemptReserveMs(lease)
    t.ok(slack > 0, `lease ${leaseS} s: ${Math.round(slack)} ms of slack at the first failure`)
    t.ok(attemptReserveMs(lease) <= Math.max(2000, lease / 3), `lease ${leaseS} s: the reserve is within an attempt's timeout`)
  }
})
