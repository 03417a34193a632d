// pxe-ctl status and the REST budget (SPEC "REST budget"): one line with what the shares in force hand out
// of the safe budget and the nodes' demand; "not configured" without one. Real controller, real bin.
import t from 'tap'
import { startFleet } from './support.js'

t.test('status shows the REST budget', async (t) => {
  const fleet = await startFleet(t, { rest: { global_per_second: 50, safety: 0.9, invalid_per_10_minutes: 10_000 } })
  await fleet.checkIn('n1', { rest_demand: { per_second: 100, invalid_10m: 0 } })
  const status = await fleet.ctl('status')
  t.equal(status.code, 0, status.stderr)
  t.match(status.stdout, /^rest budget\s+45\/s of 45\/s handed out, demand 100\/s \(the excess waits on the nodes\)$/m)
})

t.test('status says when the controller has no REST budget', async (t) => {
  const fleet = await startFleet(t)
  await fleet.checkIn('n1')
  const status = await fleet.ctl('status')
  t.match(status.stdout, /^rest budget\s+not configured$/m)
})
