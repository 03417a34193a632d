// Per-principal rate limits over real mTLS (SPEC "Rate limits"): the limit bites at the configured rate,
// another principal is unaffected, service resumes after the wait, and a limited request changes nothing
// (a limited check-in does not renew the lease). The answer carries retry_after_ms and Retry-After.
import t from 'tap'
import https from 'node:https'
import { bundle, checkinBody, makePki, request, startTestController, type Identity } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const node = await bundle(pki, 'node-a', 'node')
const other = await bundle(pki, 'node-b', 'node')
const op = await bundle(pki, 'ops-a', 'operator')
const ctl = await startTestController(pki, root, {
  lease_seconds: 3600,
  rate_limits: { node: { per_second: 2, burst: 3 }, operator: { per_second: 1000, burst: 1000 } },
})
t.teardown(() => ctl.running.stop())
const keepAlive = new Map<Identity, https.Agent>()
const agentFor = (id: Identity) => keepAlive.get(id) ?? keepAlive.set(id, new https.Agent({ keepAlive: true })).get(id)!
t.teardown(() => keepAlive.forEach((a) => a.destroy()))
const call = (id: Identity, path: string, body?: unknown) => request(ctl.port, pki.ca, id, path, { agent: agentFor(id), ...(body === undefined ? {} : { body }) })
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

t.test('burst, then 429 with retry_after_ms and Retry-After; others unaffected; resumes after the wait', async (t) => {
  for (let i = 0; i < 3; i++) t.equal((await call(node, '/v1/keys')).status, 200, `request ${i + 1} of the burst`)
  const limited = await call(node, '/v1/keys')
  t.equal(limited.status, 429)
  t.equal(limited.json.error, 'rate_limited')
  t.type(limited.json.message, 'string')
  t.ok(limited.json.retry_after_ms > 0 && limited.json.retry_after_ms <= 500, `retry_after_ms ${limited.json.retry_after_ms} (one token at 2/s)`)
  t.equal(limited.headers['retry-after'], '1', 'Retry-After in whole seconds, rounded up')
  t.equal(limited.headers['strict-transport-security'] !== undefined, true, 'security headers too')
  t.equal((await call(other, '/v1/keys')).status, 200, 'another node certificate is not limited')
  t.equal((await call(op, '/v1/plan')).status, 200, 'an operator is not limited')
  await sleep(limited.json.retry_after_ms + 20)
  t.equal((await call(node, '/v1/keys')).status, 200, 'served again after the wait')
})

t.test('a limited check-in changes nothing: the lease is not renewed', async (t) => {
  await sleep(1600) // refill node-b
  t.equal((await call(other, '/v1/checkin', checkinBody('node-b'))).status, 200, 'node-b joins')
  const seen = () => call(op, '/v1/plan').then((r) => r.json.nodes.find((n: { node_id: string }) => n.node_id === 'node-b'))
  const before = await seen()
  await sleep(1100) // a renewal now would move last_seen by a second
  for (let i = 0; i < 3; i++) await call(other, '/v1/keys') // spend the tokens
  const limited = await call(other, '/v1/checkin', checkinBody('node-b', { capacity: 32, ready_shards: 5 }))
  t.equal(limited.status, 429, 'the check-in is limited')
  t.same(await seen(), before, 'last_seen, capacity and counts unchanged')
})

t.test('the limit applies to refused requests too (a flood of bad bodies stops at the limit)', async (t) => {
  await sleep(1600)
  const statuses = []
  for (let i = 0; i < 6; i++) statuses.push((await call(node, '/v1/checkin', checkinBody('node-b'))).status)
  t.same(statuses, [403, 403, 403, 429, 429, 429], 'identity mismatches until the bucket is empty, then 429')
})
