// What a failed check-in's retry is spread over: the slack before the fail-safe, and once the fail-safe
// has fired, the slack before the lease ends (a renewal then keeps the node's range: nothing moves).
import t from 'tap'
import { defaultStopMarginMs, defaultStopTimeoutMs } from '../../src/agent/agent-options.js'
import { CheckinCadence } from '../../src/agent/cadence.js'
import { attemptReserveMs } from '../../src/agent/node-agent.js'
import { retrySlackMs } from '../../src/agent/retry-slack.js'

const LEASE = 30_000
const LEAD = defaultStopTimeoutMs(LEASE) + defaultStopMarginMs(LEASE) // 10 s at lease 30 s
const RESERVE = attemptReserveMs(LEASE) // 4.5 s
const at = (now: number, authorityEndsAt: number | null = LEASE) => retrySlackMs({ now, authorityEndsAt, failSafeLeadMs: LEAD, reserveMs: RESERVE })

t.test('before the fail-safe: the time until it, less the reserve', async (t) => {
  t.equal(LEAD, 10_000, 'the default fail-safe lead at lease 30 s')
  t.equal(at(0), 20_000 - RESERVE, 'just renewed: the fail-safe is 20 s away')
  t.equal(at(12_000), 8000 - RESERVE)
  t.equal(at(17_000), 0, 'within the reserve of the fail-safe: none left (the last attempts)')
  t.equal(at(19_999), 0)
})

t.test('after the fail-safe: the time until the lease ends, less the reserve; no last attempts', async (t) => {
  t.equal(at(20_000), 10_000 - RESERVE, 'the fail-safe has just begun: the lease still has 10 s')
  t.equal(at(22_000), 8000 - RESERVE)
  t.equal(at(25_499), 1)
  t.equal(at(25_500), null, 'within the reserve of the lease end: nothing left to spread, retried as a joining node')
  t.equal(at(29_999), null)
})

t.test('nothing at stake: no plan, or the lease has ended', async (t) => {
  t.equal(at(0, null), null, 'no plan (or authority refused): retried as a joining node')
  t.equal(at(30_000), null, 'the lease ended: the controller may have moved the range')
  t.equal(at(45_000), null)
})

t.test('a controller that stays away: the attempts go on after the fail-safe until the lease\'s reserve, none in a tight loop', async (t) => {
  // A node renewed at 0, then its controller vanished. Before this slack existed, the node backed off
  // as a joining one once its fail-safe fired (0.5, 1, 2 ... s after every failure since the first).
  for (const r of [0, 0.5, 0.999]) {
    const cadence = new CheckinCadence(() => r)
    cadence.setLease(LEASE)
    let now = 11_000 // the first regular check-in failed
    const attempts: number[] = []
    while (now < LEASE && attempts.length < 100) {
      now += cadence.retry({ slackMs: at(now), busyRetryAfterMs: null })
      attempts.push(now)
    }
    const afterFailSafe = attempts.filter((a) => a >= LEASE - LEAD && a < LEASE - RESERVE)
    t.ok(afterFailSafe.length >= 3, `random ${r}: ${afterFailSafe.length} attempts between the fail-safe and the lease's reserve (${afterFailSafe.join(', ')})`)
    const lastStretch = attempts.filter((a) => a >= LEASE - RESERVE && a < LEASE)
    t.ok(lastStretch.length <= 1, `random ${r}: no burst of last attempts in the lease's last ${RESERVE} ms (${lastStretch.join(', ')})`)
    const gaps = attempts.slice(1).map((a, i) => a - attempts[i]!)
    t.ok(Math.min(...gaps) >= 100, `random ${r}: no tight loop (attempts at least ${Math.min(...gaps)} ms apart)`)
  }
})

t.test('a busy controller\'s appointment past the lease end is not kept by a node whose fail-safe fired', async (t) => {
  const cadence = new CheckinCadence(() => 0.5)
  cadence.setLease(LEASE)
  const slack = at(21_000)! // 4.5 s
  const delay = cadence.retry({ slackMs: slack, busyRetryAfterMs: 20_000 })
  t.ok(21_000 + delay < LEASE - RESERVE, `back after ${delay} ms, before the lease's reserve begins (before: the whole 20 s appointment)`)
})
