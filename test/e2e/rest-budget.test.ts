// The REST budget over real mTLS (SPEC "REST budget"): a node's demand in its check-in, its share in the
// answer and in the signed plan (the same object), the operator's view of shares and demands; bad demand
// is refused and changes nothing; a superseded certificate's demand is refused like its check-in; a
// draining node keeps the floor only; a leaving node is answered with no share.
import t from 'tap'
import { compactVerify, createLocalJWKSet, type JSONWebKeySet } from 'jose'
import { bundle, checkinBody, makePki, opsMetric, request, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const ctl = await startTestController(pki, root, { total_shards: 16, max_concurrency: 1, lease_seconds: 30, rest: { global_per_second: 50, safety: 0.9, invalid_per_10_minutes: 10_000 } })
t.teardown(() => ctl.running.stop())
const [a, b, op] = await Promise.all([bundle(pki, 'node-a', 'node'), bundle(pki, 'node-b', 'node'), bundle(pki, 'alice', 'operator')])
const call = (id: typeof a, path: string, body?: unknown) => request(ctl.port, pki.ca, id, path, body === undefined ? {} : { body })
const plan = async () => (await call(op, '/v1/plan')).json
const restOf = async (nodeId: string) => (await plan()).nodes.find((n: { node_id: string }) => n.node_id === nodeId)?.rest
const demand = (perSecond: number, invalid = 0) => ({ rest_demand: { per_second: perSecond, invalid_10m: invalid } })

t.test('demand in, share out: in the answer and the signed plan alike', async (t) => {
  const before = Date.now()
  const first = await call(a, '/v1/checkin', checkinBody('node-a', demand(100, 3)))
  t.equal(first.status, 200)
  t.match(first.json.rest, { per_second: 45, invalid_budget: Number, until: String }, 'alone: the whole safe budget (50 × 0.9)')
  const until = Date.parse(first.json.rest.until)
  t.ok(until >= before + 30_000 - 1000 && until <= Date.now() + 30_000, 'until is the end of the lease')
  const keys = (await call(a, '/v1/keys')).json as JSONWebKeySet
  const { payload } = await compactVerify(first.json.plan_jws, createLocalJWKSet(keys))
  t.same(JSON.parse(new TextDecoder().decode(payload)).rest, first.json.rest, 'the signed plan carries the same share')

  const second = await call(b, '/v1/checkin', checkinBody('node-b', demand(5)))
  t.equal(second.json.rest.per_second, 0, 'the budget is in force with node-a: node-b waits for its lowered share')
  const lowered = await call(a, '/v1/checkin', checkinBody('node-a', demand(100, 3)))
  t.equal(lowered.json.rest.per_second, 40, 'node-a lowered at its check-in')
  const raised = await call(b, '/v1/checkin', checkinBody('node-b', demand(5)))
  t.equal(raised.json.rest.per_second, 5, 'then node-b gets its demand')

  const view = await plan()
  t.same(view.rest, { global_per_second: 50, safety: 0.9, budget_per_second: 45, invalid_budget: 9000, allocated_per_second: 45, allocated_invalid: view.rest.allocated_invalid, demand_per_second: 105 })
  t.ok(view.rest.allocated_invalid <= 9000, 'the invalid budgets in force stay within the safe budget')
  t.match(await restOf('node-a'), { per_second: 40, demand: { per_second: 100, invalid_10m: 3 } }, 'the view shows share and demand')
  t.equal(await opsMetric(ctl, 'pxe_rest_budget_per_second'), 45)
  t.equal(await opsMetric(ctl, 'pxe_rest_allocated_per_second'), 45)
  t.equal(await opsMetric(ctl, 'pxe_rest_demand_per_second'), 105)
})

t.test('bad demand is refused with a clear error and changes nothing', async (t) => {
  const before = await restOf('node-a')
  const bad: [string, unknown][] = [
    ['negative rate', { per_second: -1, invalid_10m: 0 }],
    ['absurd rate', { per_second: 1e9, invalid_10m: 0 }],
    ['string rate', { per_second: '5', invalid_10m: 0 }],
    ['fractional invalid count', { per_second: 5, invalid_10m: 1.5 }],
    ['negative invalid count', { per_second: 5, invalid_10m: -1 }],
    ['absurd invalid count', { per_second: 5, invalid_10m: 1e12 }],
    ['missing invalid count', { per_second: 5 }],
    ['unknown field', { per_second: 5, invalid_10m: 0, share: 45 }],
    ['held with a fraction of an invalid budget', { per_second: 5, invalid_10m: 0, held: { per_second: 1, invalid_budget: 0.5 } }],
    ['held with an unknown field', { per_second: 5, invalid_10m: 0, held: { per_second: 1, invalid_budget: 0, until: 'x' } }],
    ['an array', [5, 0]],
    ['null', null],
  ]
  for (const [what, value] of bad) {
    const refused = await call(a, '/v1/checkin', { ...checkinBody('node-a'), rest_demand: value })
    t.equal(refused.status, 400, `${what}: 400`)
    t.match(refused.json, { error: 'invalid_request', message: /rest_demand/ }, `${what}: the message names rest_demand`)
  }
  // a literal JSON.parse reads as Infinity: sent as raw text, as a hostile node would
  const raw = JSON.stringify(checkinBody('node-a')).replace(/}$/, ',"rest_demand":{"per_second":1e309,"invalid_10m":0}}')
  const infinite = await request(ctl.port, pki.ca, a, '/v1/checkin', { rawBody: raw })
  t.equal(infinite.status, 400, 'an infinite rate (1e309): 400')
  t.match(infinite.json, { error: 'invalid_request', message: /rest_demand/ })
  t.same(await restOf('node-a'), before, 'the share and the demand are unchanged')
})

let newer = b

t.test("a superseded certificate's demand is refused like its check-in", async (t) => {
  const before = await restOf('node-b')
  // a rotation needs a later notBefore (whole seconds): issued in the same second, the newer one is refused
  await new Promise((resolve) => setTimeout(resolve, 1100))
  newer = await bundle(pki, 'node-b', 'node')
  t.equal((await call(newer, '/v1/checkin', checkinBody('node-b', demand(5)))).status, 200, 'the rotation')
  const refused = await call(b, '/v1/checkin', checkinBody('node-b', demand(100)))
  t.equal(refused.status, 409)
  t.equal(refused.json.error, 'identity_conflict')
  t.same((await restOf('node-b')).demand, before.demand, 'its demand is what the current certificate reported')
})

t.test('a draining node keeps the floor; a leaving node is answered with no share', async (t) => {
  t.equal((await call(op, '/v1/nodes/node-b/drain', { draining: true, force: true })).status, 200)
  await new Promise((resolve) => setTimeout(resolve, 1100)) // fair targets follow a drain within a second
  const drained = await call(newer, '/v1/checkin', checkinBody('node-b', demand(5)))
  t.equal(drained.status, 200, JSON.stringify(drained.json))
  t.equal(drained.json.rest.per_second, 1, 'draining: the floor of 1/s')
  const left = await call(a, '/v1/checkin', checkinBody('node-a', { ...demand(100), leaving: true }))
  t.equal(left.status, 200)
  t.equal(left.json.rest.per_second, 0, 'leaving: no share')
  t.equal(left.json.rest.invalid_budget, 0)
  t.equal((await plan()).rest.allocated_per_second, 1, "the leaver's share is free at once")
})
