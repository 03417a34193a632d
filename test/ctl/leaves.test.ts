// pxe-ctl and nodes that leave on purpose (SPEC "Leaving on purpose"): status counts the leaves of the last
// hour, and nodes no longer lists a node that left; against a real controller, from the real bin.
import t from 'tap'
import { startFleet } from './support.js'

t.test('status counts the nodes that left on purpose; nodes no longer lists them', async (t) => {
  const fleet = await startFleet(t)
  await fleet.checkIn('n1')
  await fleet.checkIn('n2')
  const none = await fleet.ctl('status')
  t.match(none.stdout, /^left\s+none in the last hour$/m)
  await fleet.checkIn('n2', { leaving: true })
  const status = await fleet.ctl('status')
  t.equal(status.code, 0, status.stderr)
  t.match(status.stdout, /^left\s+1 in the last hour \(n2 \d+s ago\)$/m)
  const nodes = await fleet.ctl('nodes')
  t.notMatch(nodes.stdout, /^n2\s/m, 'a node that left is gone from nodes')
  t.match(nodes.stdout, /^n1\s/m)
})
