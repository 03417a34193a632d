// Routes, the policy table and the error shape through app.inject (no TLS): every endpoint for each
// role, every refusal in the SPEC's {error, message} shape with nothing changed, and the served answers
// (a signed plan that verifies under the JWKS, a grant, a route, the operator's plan and drain).
import t, { type Test } from 'tap'
import { compactVerify, createLocalJWKSet, decodeProtectedHeader } from 'jose'
import { ENDPOINT_ROLES } from '../../src/identity/policy.js'
import { injectedApp } from './inject-app.js'

const checkin = (node: string, extra: Record<string, unknown> = {}) => ({
  node_id: node, capacity: 16, ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0, ...extra,
})
const json = { 'content-type': 'application/json' }
const errorShape = (t: Test, res: { statusCode: number; json(): unknown }, status: number, code: string) => {
  t.equal(res.statusCode, status, `${code}: status ${status}`)
  const body = res.json() as Record<string, unknown>
  t.equal(body.error, code)
  t.type(body.message, 'string')
  t.notMatch(String(body.message), /FST_|at .*\.js|\/work\//, 'no framework code, stack or path')
}

t.test('the policy table, route by route and role by role; no identity is 401 before anything', async (t) => {
  const s = await injectedApp(t)
  s.principal('10.0.0.1', 'node-a', 'node')
  s.principal('10.0.0.2', 'alice', 'operator')
  s.principal('10.0.0.3', 'ca-signer', 'signer')
  const requests: Record<string, { method: 'GET' | 'POST' | 'DELETE'; url: string; body?: unknown }> = {
    'POST /v1/checkin': { method: 'POST', url: '/v1/checkin', body: checkin('node-a') },
    'POST /v1/identify': { method: 'POST', url: '/v1/identify', body: { node_id: 'node-a', shard_id: 0 } },
    'GET /v1/route/:guild_id': { method: 'GET', url: '/v1/route/0' },
    'GET /v1/keys': { method: 'GET', url: '/v1/keys' },
    'GET /v1/plan': { method: 'GET', url: '/v1/plan' },
    'POST /v1/nodes/:node_id/drain': { method: 'POST', url: '/v1/nodes/node-b/drain', body: { draining: false } },
    // a JSON body: an operator gets 415 (the CRL media types only), a node 403 first
    'POST /v1/crl': { method: 'POST', url: '/v1/crl', body: {} },
    // a count that is refused (400) changes nothing for the tests after it
    'POST /v1/reshard': { method: 'POST', url: '/v1/reshard', body: { total_shards: 3 } },
    'DELETE /v1/reshard': { method: 'DELETE', url: '/v1/reshard' },
    // bodies and ids that are refused (400, 404) or answered change nothing that matters here
    'POST /v1/renew': { method: 'POST', url: '/v1/renew', body: { csr: 'x' } },
    'GET /v1/renew/:request_id': { method: 'GET', url: '/v1/renew/AAAAAAAAAAAAAAAAAAAAAA' },
    'GET /v1/enroll/requests': { method: 'GET', url: '/v1/enroll/requests' },
    'POST /v1/enroll/requests/:request_id': { method: 'POST', url: '/v1/enroll/requests/AAAAAAAAAAAAAAAAAAAAAA', body: { denied: 'x' } },
    'GET /v1/enroll/queue': { method: 'GET', url: '/v1/enroll/queue' },
  }
  t.same(Object.keys(requests).sort(), Object.keys(ENDPOINT_ROLES).sort(), 'every endpoint of the table is tried')
  for (const [endpoint, r] of Object.entries(requests)) {
    for (const [address, role] of [['10.0.0.1', 'node'], ['10.0.0.2', 'operator'], ['10.0.0.3', 'signer']] as const) {
      const res = await s.from(address, { method: r.method, url: r.url, ...(r.body ? { payload: r.body as object, headers: json } : {}) })
      if (ENDPOINT_ROLES[endpoint]!.includes(role)) t.not(res.statusCode, 403, `${role} may call ${endpoint} (${res.statusCode} ${res.body.slice(0, 80)})`)
      else errorShape(t, res, 403, 'forbidden')
    }
    errorShape(t, await s.from('10.9.9.9', { method: r.method, url: r.url }), 401, 'unauthenticated')
  }
  errorShape(t, await s.from('10.0.0.2', { method: 'GET', url: '/v1/nothing' }), 404, 'not_found')
  errorShape(t, await s.from('10.9.9.9', { method: 'GET', url: '/v1/nothing' }), 401, 'unauthenticated')
  t.ok(s.audit.some((l) => l.event === 'unauthenticated' && l.fields.source === '10.9.9.9'), 'refusals without identity are audited per peer')
})

t.test('a revoked or expired principal is refused on every request, whatever the seam said', async (t) => {
  const s = await injectedApp(t)
  const op = s.principal('10.0.0.2', 'alice', 'operator')
  t.equal((await s.from('10.0.0.2', { method: 'GET', url: '/v1/plan' })).statusCode, 200)
  s.revoked.add(op.serial)
  errorShape(t, await s.from('10.0.0.2', { method: 'GET', url: '/v1/plan' }), 401, 'unauthenticated')
  s.principal('10.0.0.3', 'bob', 'operator', { notAfter: Date.UTC(2026, 10, 30) })
  errorShape(t, await s.from('10.0.0.3', { method: 'GET', url: '/v1/plan' }), 401, 'unauthenticated')
})

t.test('bad check-ins: 400, 403, 413, 415, each in the error shape and changing nothing', async (t) => {
  const s = await injectedApp(t)
  s.principal('10.0.0.1', 'node-a', 'node')
  s.principal('10.0.0.2', 'alice', 'operator')
  const plan = async () => (await s.from('10.0.0.2', { method: 'GET', url: '/v1/plan' })).json() as { generation: number; nodes: unknown[] }
  const before = await plan()
  const post = (payload: unknown, headers: Record<string, string> = json) => s.from('10.0.0.1', { method: 'POST', url: '/v1/checkin', payload: payload as string, headers })
  errorShape(t, await post(checkin('node-a', { extra: 1 })), 400, 'invalid_request')
  errorShape(t, await post(checkin('node-a', { capacity: 1.5 })), 400, 'invalid_request')
  errorShape(t, await post(checkin('node-b', { capacity: '16' })), 400, 'invalid_request') // malformed before identity
  errorShape(t, await post('{"node_id":', json), 400, 'invalid_request')
  errorShape(t, await post(checkin('node-a', { generation: 5 })), 400, 'invalid_request')
  errorShape(t, await post(checkin('node-b')), 403, 'identity_mismatch')
  errorShape(t, await post('node_id=node-a', { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'unsupported_media_type')
  // the CRL media types are parsed on POST /v1/crl alone
  errorShape(t, await post('-----BEGIN X509 CRL-----', { 'content-type': 'application/pkix-crl' }), 415, 'unsupported_media_type')
  errorShape(t, await post(JSON.stringify({ ...checkin('node-a'), pad: 'x'.repeat(5000) })), 413, 'payload_too_large')
  t.same(await plan(), before, 'the plan did not change')
  t.ok(s.audit.some((l) => l.event === 'identity_mismatch'), 'the mismatch was audited')
})

t.test('served: a signed plan that verifies under the JWKS, a grant, a route, the plan and a drain', async (t) => {
  const s = await injectedApp(t)
  s.principal('10.0.0.1', 'node-a', 'node')
  s.principal('10.0.0.2', 'alice', 'operator')
  const res = await s.from('10.0.0.1', { method: 'POST', url: '/v1/checkin', payload: checkin('node-a'), headers: json })
  t.equal(res.statusCode, 200)
  const answer = res.json() as { generation: number; assigned: number[]; range_count: number; plan_jws: string }
  t.equal(answer.range_count, 16)
  t.same(decodeProtectedHeader(answer.plan_jws).typ, 'pxe-plan+jwt')
  const verified = await compactVerify(answer.plan_jws, createLocalJWKSet(s.jwks as Parameters<typeof createLocalJWKSet>[0]))
  const claims = JSON.parse(new TextDecoder().decode(verified.payload)) as Record<string, unknown>
  t.match(claims, { iss: 'inject-controller', sub: 'node-a', generation: answer.generation, range_count: 16 })
  const grant = await s.from('10.0.0.1', { method: 'POST', url: '/v1/identify', payload: { node_id: 'node-a', shard_id: 3 }, headers: json })
  t.match(grant.json(), { granted: true, shard_id: 3, bucket: 3 })
  errorShape(t, await s.from('10.0.0.1', { method: 'POST', url: '/v1/identify', payload: { node_id: 'node-a', shard_id: 40 }, headers: json }), 403, 'not_owner')
  t.same((await s.from('10.0.0.1', { method: 'GET', url: `/v1/route/${(3n << 22n).toString()}` })).json(), { guild_id: (3n << 22n).toString(), shard_id: 3, node_id: 'node-a', generation: answer.generation })
  errorShape(t, await s.from('10.0.0.1', { method: 'GET', url: '/v1/route/012' }), 400, 'invalid_request')
  // node-a is the only node: its drain leaves every shard without a node, so it needs "force"
  const drained = await s.from('10.0.0.2', { method: 'POST', url: '/v1/nodes/node-a/drain', payload: { draining: true, force: true }, headers: json })
  t.same(drained.json(), { node_id: 'node-a', draining: true, generation: answer.generation + 1, live: true, unassigned: 64 })
  t.ok(s.audit.some((l) => l.event === 'drain_set' && l.fields.operator === 'alice'), 'the drain is audited with the operator')
  const plan = (await s.from('10.0.0.2', { method: 'GET', url: '/v1/plan' })).json() as { nodes: { node_id: string; draining: boolean; range_count: number }[] }
  t.match(plan.nodes, [{ node_id: 'node-a', draining: true, range_count: 0 }])
})

t.test('a drain that would strand shards: 409 insufficient_capacity with unassigned, unaudited; bad drain bodies 400', async (t) => {
  const s = await injectedApp(t)
  s.principal('10.0.0.1', 'node-a', 'node')
  s.principal('10.0.0.2', 'alice', 'operator')
  t.equal((await s.from('10.0.0.1', { method: 'POST', url: '/v1/checkin', payload: checkin('node-a', { capacity: 48 }), headers: json })).statusCode, 200)
  const plan = async () => (await s.from('10.0.0.2', { method: 'GET', url: '/v1/plan' })).json() as Record<string, unknown>
  const before = await plan()
  const drain = (payload: unknown) => s.from('10.0.0.2', { method: 'POST', url: '/v1/nodes/node-a/drain', payload: payload as string, headers: json })
  const refused = await drain({ draining: true })
  errorShape(t, refused, 409, 'insufficient_capacity')
  t.equal((refused.json() as { unassigned: number }).unassigned, 64)
  t.match((refused.json() as { message: string }).message, /would leave 48 more shards without a node \(64 in all\)/)
  for (const body of [{ draining: true, force: false }, { draining: true, force: 'yes' }, { draining: true, force: true, why: 1 }, { force: true }]) {
    errorShape(t, await drain(body), 400, 'invalid_request')
  }
  t.same(await plan(), before, 'nothing changed')
  t.notOk(s.audit.some((l) => l.event === 'drain_set'), 'no drain audited')
})

t.test('an Identify claim with another certificate of the node\'s name: 409 identity_conflict, audited with endpoint identify', async (t) => {
  const s = await injectedApp(t)
  const current = s.principal('10.0.0.1', 'node-a', 'node')
  const other = s.principal('10.0.0.3', 'node-a', 'node', { notBefore: current.notBefore + 1000 })
  t.equal((await s.from('10.0.0.1', { method: 'POST', url: '/v1/checkin', payload: checkin('node-a'), headers: json })).statusCode, 200)
  const claim = (address: string, shard: number) => s.from(address, { method: 'POST', url: '/v1/identify', payload: { node_id: 'node-a', shard_id: shard }, headers: json })
  errorShape(t, await claim('10.0.0.3', 3), 409, 'identity_conflict')
  errorShape(t, await claim('10.0.0.3', 40), 409, 'identity_conflict') // not node-a's shard: the certificate is checked first
  t.match(s.audit.filter((l) => l.event === 'identity_conflict'), [
    { fields: { source: other.serial, node_id: 'node-a', shard_id: 3, endpoint: 'identify', detail: /another certificate/ } },
    { fields: { source: other.serial, node_id: 'node-a', shard_id: 40, endpoint: 'identify' } },
  ])
  t.notOk(s.audit.some((l) => l.event === 'identify_granted'), 'nothing granted')
  t.match((await claim('10.0.0.1', 3)).json(), { granted: true, shard_id: 3, bucket: 3 }, 'the record\'s certificate: granted (the bucket was free)')
})

t.test('over its rate, a principal gets 429 with retry_after_ms and Retry-After, and nothing happens', async (t) => {
  const s = await injectedApp(t, {}, { perSecond: 1, burst: 2 })
  s.principal('10.0.0.2', 'alice', 'operator')
  for (let i = 0; i < 2; i++) t.equal((await s.from('10.0.0.2', { method: 'GET', url: '/v1/plan' })).statusCode, 200)
  const limited = await s.from('10.0.0.2', { method: 'POST', url: '/v1/nodes/node-a/drain', payload: { draining: true }, headers: json })
  errorShape(t, limited, 429, 'rate_limited')
  t.ok(Number(limited.headers['retry-after']) >= 1)
  t.ok((limited.json() as { retry_after_ms: number }).retry_after_ms > 0)
  t.notOk(s.audit.some((l) => l.event === 'drain_set'), 'the limited drain did not happen')
})
