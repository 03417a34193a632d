// The read-only accessors the metrics read at scrape time (counts(), dailyBudgetRemaining(now)): right,
// and changing nothing a snapshot, an event or an expiry would show.
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import { DAILY_WINDOW_MS, IdentifyLimiter } from '../../src/core/identify.js'
import { body, cert, checkIn, controllerWith, LEASE_MS, seededRandom, SETTINGS, T0, claimAs } from './fixtures.js'

t.test('counts follow joins, drains and expiry', async (t) => {
  const fresh = new Controller(SETTINGS)
  t.same(fresh.counts(), { live: 0, draining: 0, unassigned: 64 })
  t.equal(fresh.dailyBudgetRemaining(T0), null, 'no budget configured')
  const c = controllerWith([['a', 16], ['b', 16]])
  t.same(c.counts(), { live: 2, draining: 0, unassigned: 32 })
  c.setDraining(T0, 'a', true, true)
  c.setDraining(T0, 'ghost', true) // a flag on a node that is not live is kept, but it is no live draining node
  t.same(c.counts(), { live: 2, draining: 1, unassigned: 48 })
  checkIn(c, T0 + LEASE_MS, body('b', 16), cert('a1'))
  c.expireStaleNodes(T0 + LEASE_MS + 1)
  t.same(c.counts(), { live: 1, draining: 0, unassigned: 48 })
})

t.test('reading them changes nothing: no expiry, no event, no new state', async (t) => {
  const c = controllerWith([['a', 16]], { dailyIdentifyLimit: 5 })
  c.drainEvents()
  const snapshot = JSON.stringify(c.snapshot())
  const version = c.persistVersion
  const later = T0 + LEASE_MS + 10_000 // a's lease has lapsed; only an operation expires it
  t.same(c.counts(), { live: 1, draining: 0, unassigned: 48 })
  t.equal(c.dailyBudgetRemaining(later), 5)
  t.equal(c.generation, 1)
  t.equal(JSON.stringify(c.snapshot()), snapshot)
  t.equal(c.persistVersion, version)
  t.same(c.drainEvents(), [])
})

t.test('daily budget remaining: every grant counts for exactly 24 hours', async (t) => {
  const c = controllerWith([['a', 64]], { dailyIdentifyLimit: 3 })
  t.equal(c.dailyBudgetRemaining(T0), 3)
  t.match(claimAs(c, T0, { node_id: 'a', shard_id: 0 }), { granted: true })
  t.match(claimAs(c, T0 + 10, { node_id: 'a', shard_id: 1 }), { granted: true })
  t.equal(c.dailyBudgetRemaining(T0 + 10), 1)
  t.match(claimAs(c, T0 + 20, { node_id: 'a', shard_id: 2 }), { granted: true })
  t.equal(c.dailyBudgetRemaining(T0 + 20), 0)
  t.match(claimAs(c, T0 + 30, { node_id: 'a', shard_id: 3 }), { granted: false, reason: 'daily_limit' }, '0 left agrees with the claim rule')
  t.equal(c.dailyBudgetRemaining(T0 + 30), 0, 'never negative')
  t.equal(c.dailyBudgetRemaining(T0 + DAILY_WINDOW_MS - 1), 0, 'the first grant still counts 1 ms before 24 h')
  t.equal(c.dailyBudgetRemaining(T0 + DAILY_WINDOW_MS), 1, 'and is out of the window at 24 h')
  t.equal(c.dailyBudgetRemaining(T0 + DAILY_WINDOW_MS + 20), 3)
})

t.test('remaining agrees with check() over random grant times', async (t) => {
  const random = seededRandom(7)
  for (let round = 0; round < 50; round++) {
    const limit = 1 + Math.floor(random() * 20)
    const grants = Array.from({ length: Math.floor(random() * 25) }, () => T0 - Math.floor(random() * 2 * DAILY_WINDOW_MS))
    const limiter = new IdentifyLimiter(1, 5100, limit, null, grants)
    const inWindow = grants.filter((g) => T0 - g < DAILY_WINDOW_MS).length
    const remaining = limiter.remaining(T0)
    t.equal(remaining, Math.max(0, limit - inWindow), `round ${round}: the grants of the last 24 h count`)
    t.equal(remaining === 0, limiter.check(T0, 0)?.reason === 'daily_limit', `round ${round}: 0 left exactly when claims hit daily_limit`)
  }
})

t.test('a restored budget counts the restored grants', async (t) => {
  const c = controllerWith([['a', 64]], { dailyIdentifyLimit: 5 })
  claimAs(c, T0, { node_id: 'a', shard_id: 0 })
  const restored = new Controller({ ...SETTINGS, dailyIdentifyLimit: 5 }, { state: c.snapshot(), now: T0 + 1000 })
  t.equal(restored.dailyBudgetRemaining(T0 + 1000), 4)
})
