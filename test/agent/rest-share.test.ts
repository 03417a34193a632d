// The node's REST share from a verified plan, as pure steps: it ends at `until` or at this node's own
// lease end, whichever is first; none without `rest`; the check-in's rest_demand (held only while in
// force); and a plan whose `rest` is not the contract's shape is malformed, so nothing changes.
import t from 'tap'
import { planClaimsSchema, plainFieldMismatch, type PlanClaims } from '../../src/agent/plan-claims.js'
import { grantOf, restDemandBody, shareFromPlan, type RestProxyLink } from '../../src/agent/rest-share.js'

const WALL = 1_767_225_600_000
const base: PlanClaims = { iss: 'c', sub: 'node-a', iat: WALL / 1000, exp: WALL / 1000 + 30, generation: 1, total_shards: 4, range_start: 0, range_count: 0, assigned: [], lease_seconds: 30, max_concurrency: 1 }
const withRest = (perSecond: number, until: number, invalid = 900): PlanClaims => ({ ...base, rest: { per_second: perSecond, invalid_budget: invalid, until: new Date(until).toISOString() } })

t.test('shareFromPlan: until, or the node\'s own lease end if earlier; none without rest or once ended', async (t) => {
  // monotonic now = 10_000, the check-in was sent at 9_000 (lease end 39_000 on the monotonic clock)
  t.same(shareFromPlan(withRest(12.5, WALL + 20_000), 9_000, 10_000, WALL), { perSecond: 12.5, invalidBudget: 900, untilMs: 30_000 }, 'until first')
  t.same(shareFromPlan(withRest(12.5, WALL + 60_000), 9_000, 10_000, WALL), { perSecond: 12.5, invalidBudget: 900, untilMs: 39_000 }, 'a controller clock ahead: the lease ends first')
  t.equal(shareFromPlan(withRest(12.5, WALL - 1), 9_000, 10_000, WALL), null, 'until already passed')
  t.equal(shareFromPlan(base, 9_000, 10_000, WALL), null, 'a controller without rest: no share')
  t.same(shareFromPlan(withRest(0, WALL + 20_000), 9_000, 10_000, WALL)?.perSecond, 0, 'a share of 0 is held (everything waits)')
  t.same(grantOf({ perSecond: 3, invalidBudget: 4, untilMs: 30_000 }, 10_000), { perSecond: 3, invalidBudget: 4, validForMs: 20_000 })
  t.same(grantOf({ perSecond: 3, invalidBudget: 4, untilMs: 30_000 }, 40_000).validForMs, 0)
})

t.test('rest_demand: the proxy\'s counts, and held only while the share is in force', async (t) => {
  const asked: number[] = []
  const proxy: RestProxyLink = { setShare: () => {}, registerMetrics: () => {}, demand: (windowMs) => (asked.push(windowMs), { perSecond: 7.25, invalid10m: 3 }) }
  const share = { perSecond: 5, invalidBudget: 900, untilMs: 30_000 }
  t.same(restDemandBody(proxy, 10_000, share, 20_000), { per_second: 7.25, invalid_10m: 3, held: { per_second: 5, invalid_budget: 900 } })
  t.same(restDemandBody(proxy, 10_000, share, 30_000), { per_second: 7.25, invalid_10m: 3 }, 'ran out: no held')
  t.same(restDemandBody(proxy, 10_000, null, 0), { per_second: 7.25, invalid_10m: 3 })
  t.same(asked, [10_000, 10_000, 10_000])
})

t.test('a signed rest that is not the contract\'s shape makes the payload malformed', async (t) => {
  const until = new Date(WALL).toISOString()
  const bad: [string, unknown][] = [
    ['negative rate', { per_second: -1, invalid_budget: 1, until }],
    ['absurd rate', { per_second: 1e9, invalid_budget: 1, until }],
    ['string rate', { per_second: '5', invalid_budget: 1, until }],
    ['fractional budget', { per_second: 5, invalid_budget: 1.5, until }],
    ['negative budget', { per_second: 5, invalid_budget: -1, until }],
    ['absurd budget', { per_second: 5, invalid_budget: 1e12, until }],
    ['missing until', { per_second: 5, invalid_budget: 1 }],
    ['until not ISO', { per_second: 5, invalid_budget: 1, until: 'tomorrow' }],
    ['until a number', { per_second: 5, invalid_budget: 1, until: WALL }],
    ['until with an offset', { per_second: 5, invalid_budget: 1, until: '2026-12-07T19:30:00+01:00' }],
    ['until not a date', { per_second: 5, invalid_budget: 1, until: '2026-13-45T25:61:00.000Z' }],
    ['unknown field', { per_second: 5, invalid_budget: 1, until, burst: 2 }],
    ['not an object', 45],
  ]
  for (const [name, rest] of bad) t.notOk(planClaimsSchema.safeParse({ ...base, rest }).success, name)
  t.ok(planClaimsSchema.safeParse({ ...base, rest: { per_second: 12.34, invalid_budget: 0, until } }).success, 'the good one')
  t.ok(planClaimsSchema.safeParse(base).success, 'absent: fine (a controller without rest)')
})

t.test('the answer\'s plain rest must agree with the signed one, field by field', async (t) => {
  const signed = withRest(5, WALL + 30_000)
  t.equal(plainFieldMismatch({ ...signed, rest: { until: signed.rest!.until, invalid_budget: 900, per_second: 5 } }, signed), null, 'key order does not matter')
  t.equal(plainFieldMismatch({ ...signed, rest: { ...signed.rest!, per_second: 50 } }, signed), 'rest')
  t.equal(plainFieldMismatch({ ...signed, rest: undefined }, signed), 'rest', 'signed but not in plain')
  t.equal(plainFieldMismatch(signed, base), 'rest', 'in plain but not signed')
  t.equal(plainFieldMismatch(base, base), null)
})
