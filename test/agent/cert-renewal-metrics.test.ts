// Renewal timing (two thirds of the lifetime, ±5 % of it; backoff after a failure) and the two metrics:
// pxe_node_cert_expiry_timestamp_seconds and pxe_node_cert_renewal_failures_total, the latter counted by
// a bundle agent whose renewal a (stand-in) controller keeps refusing over real mTLS, logged at warn.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { pino } from 'pino'
import { Writable } from 'node:stream'
import { AgentMetrics } from '../../src/agent/agent-metrics.js'
import { renewalDueAt, renewalRetryMs, RENEW_AT, RENEW_JITTER } from '../../src/agent/cert-renewer.js'
import { identityFromPem } from '../../src/agent/identity.js'
import { bundle, makePki } from '../e2e/harness.js'
import { sample } from './metrics-text.js'
import { fakeController, Recorder, recordingAgent, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)

t.test('renewal is due at two thirds of the lifetime, jittered by at most 5 % of it', async (t) => {
  const id = { notBefore: 1_000_000, notAfter: 1_000_000 + 90_000 }
  t.equal(renewalDueAt(id, 0.5), 1_060_000, 'no jitter: two thirds')
  t.equal(renewalDueAt(id, 0), 1_000_000 + Math.round(90_000 * (RENEW_AT - RENEW_JITTER)))
  t.equal(renewalDueAt(id, 0.999999), 1_000_000 + Math.round(90_000 * (RENEW_AT + RENEW_JITTER * 0.999998)))
  t.equal(renewalDueAt(id, 0.5, 0.35), 1_031_500, 'another point when asked')
  const day = { notBefore: 0, notAfter: 86_400_000 }
  for (let i = 0; i < 200; i++) {
    const due = renewalDueAt(day, Math.random())
    t.ok(due >= 86_400_000 * 0.6166 && due <= 86_400_000 * 0.7167, 'within ±5 %')
  }
})

t.test('a failed renewal is retried with backoff: 2 s doubling up to 5 minutes, ±20 %', async (t) => {
  t.same([1, 2, 3, 4].map((n) => renewalRetryMs(n, 0.5)), [2000, 4000, 8000, 16000])
  t.equal(renewalRetryMs(50, 0.5), 300_000)
  t.equal(renewalRetryMs(1, 0), 1600)
  t.equal(renewalRetryMs(1, 1), 2400)
})

t.test('the expiry gauge shows the certificate in use; the failures counter starts at 0 and counts failures', async (t) => {
  const metrics = new AgentMetrics({ status: () => ({ state: 'idle', assigned: [], acceptedGeneration: null, reportedGeneration: null, lastRenewalAckAt: null, authorityEndsAt: null }) as never, health: () => ({ ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 }), certificateExpiry: () => 1_767_225_600_000 })
  let text = await metrics.registry.metrics()
  t.equal(sample(text, 'pxe_node_cert_expiry_timestamp_seconds'), 1_767_225_600)
  t.equal(sample(text, 'pxe_node_cert_renewal_failures_total'), 0)
  t.match(text, /# TYPE pxe_node_cert_renewal_failures_total counter/)
  t.match(text, /# TYPE pxe_node_cert_expiry_timestamp_seconds gauge/)
  metrics.observe({ type: 'certificate_renewal_failed', detail: 'x', retryInMs: 2000, expiresAt: 0 })
  metrics.observe({ type: 'certificate_renewed', serial: 'ab', notAfter: 0 })
  metrics.observe({ type: 'certificate_renewal_failed', detail: 'x', retryInMs: 2000, expiresAt: 0 })
  text = await metrics.registry.metrics()
  t.equal(sample(text, 'pxe_node_cert_renewal_failures_total'), 2)
})

t.test('a bundle agent past two thirds renews at once; refusals are logged at warn, counted and retried', async (t) => {
  // issued 20 h ago for a day: past two thirds
  const id = await bundle(pki, 'node-renew', 'node', { notBefore: new Date(Date.now() - 20 * 3_600_000), days: 1 })
  const jwks = JSON.parse(readFileSync(join(pki.dir, 'plan-jwks.json'), 'utf8'))
  const identity = await identityFromPem({ cert: id.cert, key: id.key, ca: pki.ca, jwks })
  const fake = await fakeController(pki, (_cn, path) =>
    path === '/v1/renew' ? { status: 500, body: { error: 'internal_error', message: 'internal error' } } : { status: 503, body: { error: 'not_leader', message: 'x' } },
  )
  t.teardown(() => fake.close())
  let logText = ''
  const logger = pino({ level: 'debug' }, new Writable({ write: (chunk, _enc, done) => ((logText += String(chunk)), done()) }))
  const rec = new Recorder()
  const agent = recordingAgent(rec, identity, [urlOf(fake.port)], { logger })
  await agent.start()
  t.teardown(() => agent.stop())
  await until('two failed renewals', () => rec.events('node-renew', 'certificate_renewal_failed').length >= 2, 15_000)
  const failures = rec.events('node-renew', 'certificate_renewal_failed')
  t.match(failures[0]!.event.detail, /the renewal request was answered 500 internal_error/)
  t.equal(failures[0]!.event.expiresAt, identity.notAfter)
  t.ok(failures[1]!.at - failures[0]!.at >= 1500, 'retried after a backoff')
  t.ok(fake.seen.filter((s) => s === 'node-renew POST /v1/renew').length >= 2, 'the request went over mTLS with the current certificate')
  const text = await agent.metrics.metrics()
  t.ok(sample(text, 'pxe_node_cert_renewal_failures_total')! >= 2)
  t.equal(sample(text, 'pxe_node_cert_expiry_timestamp_seconds'), identity.notAfter / 1000)
  const warn = logText.split('\n').filter(Boolean).map((l) => JSON.parse(l)).find((l) => l.event === 'certificate_renewal_failed')
  t.equal(warn?.level, 40, 'logged at warn')
  t.notOk(logText.includes('PRIVATE KEY'), 'no key in the log')
})
