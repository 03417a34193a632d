// Served paths over real mTLS: check-in with a signed plan, operator plan read and drain, routing, keys.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { compactVerify, createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose'
import { bundle, checkinBody, makePki, request, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const nodeA = await bundle(pki, 'compaq-01', 'node')
const nodeB = await bundle(pki, 'compaq-02', 'node')
const op = await bundle(pki, 'ops-alice', 'operator')
const ctl = await startTestController(pki, root)
t.teardown(() => ctl.running.stop())
const get = (id: typeof op, path: string) => request(ctl.port, pki.ca, id, path)

t.test('a node checks in and its plan_jws verifies under the JWKS shipped in its bundle', async (t) => {
  const res = await request(ctl.port, pki.ca, nodeA, '/v1/checkin', { body: checkinBody('compaq-01', { capacity: 16 }) })
  t.equal(res.status, 200, res.text)
  t.match(res.json, { generation: 1, total_shards: 64, range_start: 0, range_count: 16, lease_seconds: 30, max_concurrency: 16 })
  t.same(res.json.assigned, Array.from({ length: 16 }, (_, i) => i))
  const jwks = JSON.parse(readFileSync(join(pki.dir, 'bundles', 'compaq-01', 'plan-jwks.json'), 'utf8'))
  const keySet = createLocalJWKSet(jwks)
  const { payload, protectedHeader } = await jwtVerify(res.json.plan_jws, keySet, { algorithms: ['EdDSA'], typ: 'pxe-plan+jwt', subject: 'compaq-01', issuer: 'test-controller' })
  t.equal(protectedHeader.kid, jwks.keys[0].kid)
  for (const k of ['generation', 'total_shards', 'range_start', 'range_count', 'assigned', 'lease_seconds', 'max_concurrency'] as const) {
    t.same(payload[k], res.json[k], `claim ${k} equals the plain field`)
  }
  t.equal((payload.exp as number) - (payload.iat as number), 30, 'exp = iat + lease_seconds')
  t.equal(decodeProtectedHeader(res.json.plan_jws).alg, 'EdDSA')
  // A tampered payload does not verify.
  const [h, p, s] = res.json.plan_jws.split('.')
  const forged = Buffer.from(JSON.stringify({ ...payload, range_count: 64 })).toString('base64url')
  t.not(forged, p, 'the forgery really changed the payload')
  await t.rejects(compactVerify(`${h}.${forged}.${s}`, keySet))
  t.equal(res.headers['strict-transport-security'], 'max-age=31536000; includeSubDomains', 'helmet HSTS on every answer')
  t.equal(res.headers['x-content-type-options'], 'nosniff')
})

t.test('GET /v1/keys serves the JWKS to any role', async (t) => {
  for (const id of [nodeA, op]) {
    const res = await get(id, '/v1/keys')
    t.equal(res.status, 200)
    t.equal(res.json.keys.length, 1)
    t.match(res.json.keys[0], { kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' })
    t.notOk('d' in res.json.keys[0], 'no private part is published')
  }
})

t.test('an operator reads the plan and drains a node', async (t) => {
  const r2 = await request(ctl.port, pki.ca, nodeB, '/v1/checkin', { body: checkinBody('compaq-02', { capacity: 16, ready_shards: 3 }) })
  t.equal(r2.status, 200)
  const plan = await get(op, '/v1/plan')
  t.equal(plan.status, 200)
  t.match(plan.json, { total_shards: 64, max_concurrency: 16, lease_seconds: 30, leader: 'test-controller' })
  t.same(plan.json.nodes.map((n: { node_id: string }) => n.node_id), ['compaq-01', 'compaq-02'])
  t.match(plan.json.nodes[1], { capacity: 16, draining: false, ready_shards: 3, generation: null })
  t.ok(!Number.isNaN(Date.parse(plan.json.nodes[1].last_seen)))
  // compaq-01 grows to 64: it can take compaq-02's shards (a drain that would strand some: drain-capacity.test.ts)
  t.equal((await request(ctl.port, pki.ca, nodeA, '/v1/checkin', { body: checkinBody('compaq-01', { capacity: 64 }) })).status, 200)
  const before = (await get(op, '/v1/plan')).json.generation
  const drained = await request(ctl.port, pki.ca, op, '/v1/nodes/compaq-02/drain', { body: { draining: true } })
  t.equal(drained.status, 200, drained.text)
  t.same(drained.json, { node_id: 'compaq-02', draining: true, generation: before + 1, live: true, unassigned: 0 })
  const after = await get(op, '/v1/plan')
  t.match(after.json.nodes[1], { draining: true, range_count: 0 })
  const undrained = await request(ctl.port, pki.ca, op, '/v1/nodes/compaq-02/drain', { body: { draining: false } })
  t.equal(undrained.json.draining, false)
  t.equal((await request(ctl.port, pki.ca, nodeA, '/v1/checkin', { body: checkinBody('compaq-01', { capacity: 16 }) })).status, 200, 'compaq-01 back to 16')
  const audit = readFileSync(join(root, 'audit.log'), 'utf8')
  t.match(audit, /"event":"drain_set".*"operator":"ops-alice"/)
})

t.test('routing: any role, exact BigInt arithmetic, malformed ids refused', async (t) => {
  const res = await get(nodeA, '/v1/route/175928847299117063')
  t.equal(res.status, 200)
  const shard = Number((175928847299117063n >> 22n) % 64n)
  t.match(res.json, { guild_id: '175928847299117063', shard_id: shard })
  const max = await get(op, '/v1/route/18446744073709551615')
  t.equal(max.json.shard_id, Number((18446744073709551615n >> 22n) % 64n))
  for (const bad of ['-1', '007', '18446744073709551616', 'abc', '1e3']) {
    const r = await get(op, `/v1/route/${bad}`)
    t.equal(r.status, 400, bad)
    t.equal(r.json.error, 'invalid_request')
  }
})

t.test('Identify over mTLS: grant, then the same bucket is busy for another node', async (t) => {
  const g = await request(ctl.port, pki.ca, nodeA, '/v1/identify', { body: { node_id: 'compaq-01', shard_id: 0 } })
  t.equal(g.status, 200, g.text)
  t.match(g.json, { granted: true, shard_id: 0, bucket: 0 })
  const plan = await get(op, '/v1/plan')
  const bNode = plan.json.nodes[1]
  const bShard16 = bNode.range_start + (16 - (bNode.range_start % 16)) % 16 // a shard of B in bucket 0
  // B's range came from A (the drain and undrain above): A reports the current generation, which
  // releases the handoff, so what stops B now can only be the bucket A just used.
  const released = await request(ctl.port, pki.ca, nodeA, '/v1/checkin', { body: checkinBody('compaq-01', { capacity: 16, generation: plan.json.generation }) })
  t.equal(released.json.generation, plan.json.generation, 'A applied the current plan; nothing moved')
  const busy = await request(ctl.port, pki.ca, nodeB, '/v1/identify', { body: { node_id: 'compaq-02', shard_id: bShard16 } })
  t.equal(busy.status, 200)
  t.equal(busy.json.granted, false)
  t.equal(busy.json.reason, 'bucket_busy')
  t.ok(busy.json.retry_after_ms > 0 && busy.json.retry_after_ms <= 5100, `retry_after_ms ${busy.json.retry_after_ms} within one interval`)
  const notMine = await request(ctl.port, pki.ca, nodeA, '/v1/identify', { body: { node_id: 'compaq-01', shard_id: 63 } })
  t.equal(notMine.status, 403)
  t.equal(notMine.json.error, 'not_owner')
  const outOfRange = await request(ctl.port, pki.ca, nodeA, '/v1/identify', { body: { node_id: 'compaq-01', shard_id: 64 } })
  t.equal(outOfRange.status, 400)
})
