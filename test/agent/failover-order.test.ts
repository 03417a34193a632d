// The order of a client's attempts over its controller URLs (shared by the agent's ControllerClient and
// the fleet bench's light node): the last URL that answered first, a busy notice ending an attempt at
// most twice in a row, the next URL first after an attempt every URL failed.
import t from 'tap'
import { FailoverOrder, MAX_BUSY_ENDED_ATTEMPTS } from '../../src/agent/failover-order.js'

t.test('an attempt starts with the URL that answered last and goes round the others', async (t) => {
  const order = new FailoverOrder(3)
  t.same(order.attempt(), [0, 1, 2])
  order.answered(2)
  t.same(order.attempt(), [2, 0, 1])
  t.equal(order.first, 2)
  order.exhausted()
  t.same(order.attempt(), [0, 1, 2], 'every URL failed: the next attempt starts with the next one')
})

t.test('a busy notice ends the attempt at most twice in a row; an answer or a full sweep starts the count over', async (t) => {
  t.equal(MAX_BUSY_ENDED_ATTEMPTS, 2)
  const order = new FailoverOrder(2)
  order.answered(1)
  t.ok(order.busy(1), 'first busy attempt: ends here')
  t.equal(order.first, 1, 'and the next starts with it')
  t.ok(order.busy(1), 'second: ends here')
  t.notOk(order.busy(1), 'third: goes on to the other URL (a forged notice cannot hold a node)')
  order.exhausted()
  t.equal(order.first, 0)
  t.ok(order.busy(1), 'after the sweep the count starts over')
  order.answered(1)
  t.ok(order.busy(1) && order.busy(1), 'after an answer too: two more')
  t.notOk(order.busy(0), 'counted per client, whichever URL is busy')
})

t.test('a busy URL that is not the first one tried becomes the first', async (t) => {
  const order = new FailoverOrder(3)
  t.ok(order.busy(2))
  t.same(order.attempt(), [2, 0, 1])
})

t.test('no URLs is refused', async (t) => {
  t.throws(() => new FailoverOrder(0), RangeError)
})
