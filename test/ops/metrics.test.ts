// The metrics move with real traffic: every check scrapes /metrics before and after real mTLS requests
// (certificates made at run time by our own pki/) and compares. Issue 10 item 2.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { X509Certificate } from 'node:crypto'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import net from 'node:net'
import tls from 'node:tls'
import { join } from 'node:path'
import { writeCrl } from '../../pki/revocation.js'
import { bundle, checkinBody, makePki, request, startTestController } from '../e2e/harness.js'
import { eventually, scrape, type Scrape } from './scrape.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const foreignPki = await makePki(join(root, 'foreign'))
const a = await bundle(pki, 'node-a', 'node')
const b = await bundle(pki, 'node-b', 'node')
const op = await bundle(pki, 'ops-a', 'operator')
const foreign = await bundle(foreignPki, 'node-f', 'node')
const expired = await bundle(pki, 'node-old', 'node', { notBefore: new Date(Date.now() - 10 * 86_400_000), days: 1 })
// The operator's bucket is small, so that the fourth plan read is rate limited; nodes are not limited.
const ctl = await startTestController(pki, root, {
  lease_seconds: 3600,
  daily_identify_limit: 2,
  rate_limits: { node: { per_second: 100_000, burst: 100_000 }, operator: { per_second: 0.001, burst: 3 } },
})
t.teardown(() => ctl.running.stop())
const opsPort = ctl.opsPort!
const delta = (before: Scrape, after: Scrape, name: string, labels: Record<string, string> = {}) => after.count(name, labels) - before.count(name, labels)
const claim = (id: typeof a, nodeId: string, shardId: number) => request(ctl.port, pki.ca, id, '/v1/identify', { body: { node_id: nodeId, shard_id: shardId } })

t.test('a fresh controller: state gauges, certificate and CRL timestamps, leader and ready', async (t) => {
  const s = await scrape(opsPort)
  t.equal(s.value('pxe_plan_generation'), 0)
  t.equal(s.value('pxe_nodes_live'), 0)
  t.equal(s.value('pxe_nodes_draining'), 0)
  t.equal(s.value('pxe_shards'), 64)
  t.equal(s.value('pxe_shards_total'), 64, 'also under the name the SPEC gives')
  t.equal(s.value('pxe_shards_unassigned'), 64)
  t.equal(s.value('pxe_identify_daily_budget_remaining'), 2)
  t.equal(s.value('pxe_identify_daily_budget_limit'), 2)
  t.equal(s.value('pxe_is_leader'), 1, 'a standalone controller serves')
  t.equal(s.value('pxe_ready'), 1)
  // Expected values read with other tools than the code under test: Node's X509Certificate, the OpenSSL CLI.
  const notAfter = Date.parse(new X509Certificate(readFileSync(join(pki.dir, 'server.pem'))).validTo) / 1000
  t.equal(s.value('pxe_server_cert_expiry_timestamp_seconds'), notAfter)
  const nextUpdate = execFileSync('openssl', ['crl', '-in', join(pki.dir, 'crl.pem'), '-noout', '-nextupdate'], { encoding: 'utf8' })
  t.equal(s.value('pxe_crl_next_update_timestamp_seconds'), Date.parse(nextUpdate.replace(/^nextUpdate=/, '')) / 1000)
  t.ok((s.value('process_cpu_seconds_total') ?? -1) >= 0, 'default process metrics are there')
  t.ok(s.value('nodejs_eventloop_lag_seconds') !== undefined)
  // Not the gauges that walk every open handle at each scrape (src/ops/process-metrics.ts); open descriptors still counted.
  t.equal(s.value('nodejs_active_handles_total'), undefined)
  t.equal(s.value('nodejs_active_resources_total'), undefined)
  if (process.platform === 'linux') t.ok((s.value('process_open_fds') ?? 0) > 0, 'open descriptors counted')
})

t.test('check-ins: generation, live nodes, unassigned shards, results, requests, durations, state writes', async (t) => {
  const before = await scrape(opsPort)
  t.equal((await request(ctl.port, pki.ca, a, '/v1/checkin', { body: checkinBody('node-a') })).status, 200)
  t.equal((await request(ctl.port, pki.ca, b, '/v1/checkin', { body: checkinBody('node-b') })).status, 200)
  t.equal((await request(ctl.port, pki.ca, a, '/v1/checkin', { body: checkinBody('node-b') })).status, 403, 'identity mismatch')
  t.equal((await request(ctl.port, pki.ca, a, '/v1/checkin', { body: checkinBody('node-a', { capacity: 0 }) })).status, 400)
  const after = await scrape(opsPort)
  t.equal(after.value('pxe_plan_generation'), 2)
  t.equal(after.value('pxe_nodes_live'), 2)
  t.equal(after.value('pxe_shards_unassigned'), 32)
  t.equal(delta(before, after, 'pxe_checkins_total', { result: 'ok' }), 2)
  t.equal(delta(before, after, 'pxe_checkins_total', { result: 'identity_mismatch' }), 1)
  t.equal(delta(before, after, 'pxe_checkins_total', { result: 'invalid_request' }), 1)
  t.equal(delta(before, after, 'pxe_requests_total', { route: '/v1/checkin', status: '200' }), 2)
  t.equal(delta(before, after, 'pxe_requests_total', { route: '/v1/checkin', status: '403' }), 1)
  t.equal(delta(before, after, 'pxe_request_duration_seconds_count', { route: '/v1/checkin' }), 4)
  t.ok(delta(before, after, 'pxe_request_duration_seconds_sum', { route: '/v1/checkin' }) > 0)
  t.ok(delta(before, after, 'pxe_tls_handshake_duration_seconds_count') >= 1, 'the completed handshakes were timed')
  t.ok(delta(before, after, 'pxe_tls_handshake_duration_seconds_sum') > 0)
  t.ok(delta(before, after, 'pxe_state_write_duration_seconds_count') >= 1, 'the joins were written durably')
  t.ok(delta(before, after, 'pxe_state_write_duration_seconds_sum') > 0)
  t.equal(after.value('pxe_state_write_failures_total'), 0)
  t.ok(delta(before, after, 'pxe_replan_duration_seconds_count') >= 1, 'the joins were re-planned, and the re-plan timed')
  t.ok(delta(before, after, 'pxe_replan_duration_seconds_sum') > 0)
  t.equal((await request(ctl.port, pki.ca, a, '/v1/checkin', { body: checkinBody('node-a') })).status, 200)
  const again = await scrape(opsPort)
  t.equal(delta(after, again, 'pxe_replan_duration_seconds_count'), 0, 'a repeated check-in re-plans nothing')
})

t.test('Identify claims by result, and the daily budget', async (t) => {
  // node-a owns 0..15 and node-b 16..31 (two joins of capacity 16); buckets are shard % 16.
  const before = await scrape(opsPort)
  t.match((await claim(a, 'node-a', 0)).json, { granted: true })
  t.match((await claim(a, 'node-a', 0)).json, { granted: false, reason: 'bucket_busy' })
  t.equal((await claim(a, 'node-a', 20)).status, 403, 'not_owner')
  // node-a shrinks to 8: shards 8..15 move to node-b, which waits until node-a applied the new plan.
  t.equal((await request(ctl.port, pki.ca, a, '/v1/checkin', { body: checkinBody('node-a', { capacity: 8 }) })).status, 200)
  t.match((await claim(b, 'node-b', 8)).json, { granted: false, reason: 'handoff_pending' })
  const middle = await scrape(opsPort)
  t.equal(middle.value('pxe_identify_daily_budget_remaining'), 1)
  t.match((await claim(a, 'node-a', 1)).json, { granted: true })
  t.match((await claim(a, 'node-a', 2)).json, { granted: false, reason: 'daily_limit' })
  const after = await scrape(opsPort)
  for (const [result, n] of [['granted', 2], ['bucket_busy', 1], ['not_owner', 1], ['handoff_pending', 1], ['daily_limit', 1]] as const) {
    t.equal(delta(before, after, 'pxe_identify_claims_total', { result }), n, result)
  }
  t.equal(after.value('pxe_identify_daily_budget_remaining'), 0)
  t.equal(after.value('pxe_plan_generation'), 3)
  t.equal(delta(before, after, 'pxe_requests_total', { route: '/v1/identify', status: '200' }), 5)
})

t.test('refused TLS handshakes are counted by normalized reason', async (t) => {
  const before = await scrape(opsPort)
  await t.rejects(request(ctl.port, pki.ca, null, '/v1/keys'), 'no client certificate')
  await t.rejects(request(ctl.port, pki.ca, foreign, '/v1/keys'), 'another CA')
  await t.rejects(request(ctl.port, pki.ca, expired, '/v1/keys'), 'expired')
  let after = before
  t.ok(await eventually(2000, async () => {
    after = await scrape(opsPort)
    return delta(before, after, 'pxe_tls_handshake_failures_total') >= 3
  }))
  t.equal(delta(before, after, 'pxe_tls_handshake_failures_total', { reason: 'no_client_certificate' }), 1)
  t.equal(delta(before, after, 'pxe_tls_handshake_failures_total', { reason: 'untrusted_certificate' }), 1)
  t.equal(delta(before, after, 'pxe_tls_handshake_failures_total', { reason: 'cert_expired' }), 1)
  t.equal(delta(before, after, 'pxe_tls_handshake_failures_total'), 3, 'nothing else')
  t.equal(delta(before, after, 'pxe_tls_handshake_duration_seconds_count'), 0, 'a refused handshake is not timed as a completed one')
})

t.test('a handshake is timed from the accept: a client that waits before its ClientHello shows the wait', async (t) => {
  const before = await scrape(opsPort)
  const raw = net.connect({ host: '127.0.0.1', port: ctl.port })
  await once(raw, 'connect')
  await new Promise((r) => setTimeout(r, 300))
  const socket = tls.connect({ socket: raw, ca: pki.ca, cert: a.cert, key: a.key, host: '127.0.0.1' })
  await once(socket, 'secureConnect')
  socket.end() // (not destroy: the client's Finished, which completes the server's side, must go out first)
  await once(socket, 'close')
  let after = before
  t.ok(await eventually(2000, async () => {
    after = await scrape(opsPort)
    return delta(before, after, 'pxe_tls_handshake_duration_seconds_count') >= 1
  }))
  t.equal(delta(before, after, 'pxe_tls_handshake_duration_seconds_count'), 1, 'one handshake')
  t.equal(delta(before, after, 'pxe_tls_handshake_duration_seconds_bucket', { le: '0.25' }), 0, 'it took longer than 0.25 s')
  t.equal(delta(before, after, 'pxe_tls_handshake_duration_seconds_bucket', { le: '10' }), 1)
  t.ok(delta(before, after, 'pxe_tls_handshake_duration_seconds_sum') >= 0.25)
})

t.test('rate-limited requests by role; unmatched routes', async (t) => {
  const before = await scrape(opsPort)
  const statuses = []
  for (let i = 0; i < 4; i++) statuses.push((await request(ctl.port, pki.ca, op, '/v1/plan')).status)
  t.same(statuses, [200, 200, 200, 429])
  t.equal((await request(ctl.port, pki.ca, a, '/v1/no-such-thing')).status, 404)
  const after = await scrape(opsPort)
  t.equal(delta(before, after, 'pxe_rate_limited_total', { role: 'operator' }), 1)
  t.equal(delta(before, after, 'pxe_rate_limited_total', { role: 'node' }), 0)
  t.equal(delta(before, after, 'pxe_requests_total', { route: '/v1/plan', status: '429' }), 1)
  t.equal(delta(before, after, 'pxe_requests_total', { route: 'unmatched', status: '404' }), 1)
})

t.test('a new CRL moves the next-update timestamp', async (t) => {
  const before = (await scrape(opsPort)).value('pxe_crl_next_update_timestamp_seconds')
  await writeCrl(pki.dir, { crlDays: 3 })
  const expected = Date.parse(execFileSync('openssl', ['crl', '-in', join(pki.dir, 'crl.pem'), '-noout', '-nextupdate'], { encoding: 'utf8' }).replace(/^nextUpdate=/, '')) / 1000
  t.not(expected, before, 'the new CRL has another nextUpdate')
  t.ok(await eventually(5000, async () => (await scrape(opsPort)).value('pxe_crl_next_update_timestamp_seconds') === expected), 'the gauge follows the CRL in force')
})

t.test('no label carries a node ID, a certificate serial or any other unbounded value', async (t) => {
  const s = await scrape(opsPort)
  for (const secretish of ['node-a', 'node-b', 'node-f', 'node-old', 'ops-a', a.serial, b.serial, op.serial, expired.serial, foreign.serial]) {
    t.notOk(s.text.toLowerCase().includes(secretish.toLowerCase()), `${secretish} appears nowhere in the scrape`)
  }
  const allowed: Record<string, RegExp> = {
    route: /^(\/v1\/checkin|\/v1\/identify|\/v1\/route\/:guild_id|\/v1\/keys|\/v1\/plan|\/v1\/nodes\/:node_id\/drain|unmatched)$/,
    status: /^[1-5]\d\d$/,
    result: /^[a-z_]+$/,
    reason: /^[a-z_]+$/,
    role: /^(node|operator|signer)$/,
  }
  const pxe = s.samples.filter((x) => x.name.startsWith('pxe_'))
  t.ok(pxe.length > 20)
  for (const sample of pxe) {
    for (const [label, value] of Object.entries(sample.labels)) {
      if (label === 'le') continue // histogram bucket bounds
      t.ok(allowed[label]?.test(value), `${sample.name}{${label}="${value}"} is a bounded label value`)
    }
  }
})
