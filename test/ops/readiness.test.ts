// /readyz answers 503 with stable reasons: state writes failing (an EIO injected around the real store,
// as test/e2e/state-write-failure.test.ts does), a real CRL that passes its nextUpdate, the mTLS listener
// really closed. Each condition heals, and /readyz with it. Issue 10 item 2.
import t from 'tap'
import { writeCrl } from '../../pki/revocation.js'
import { FailingStore } from '../support/failing-store.js'
import { bundle, checkinBody, makePki, request, startTestController } from '../e2e/harness.js'
import { eventually, opsRequest, scrape } from './scrape.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const a = await bundle(pki, 'node-a', 'node')
const b = await bundle(pki, 'node-b', 'node')
let faulty: FailingStore | undefined
const ctl = await startTestController(pki, root, { lease_seconds: 3600 }, { wrapStore: (s) => (faulty = new FailingStore(s)) })
t.teardown(() => ctl.running.stop())
const opsPort = ctl.opsPort!
const readyz = () => opsRequest(opsPort, '/readyz')
const isReady = async () => (await readyz()).status === 200

t.test('state not durable: 503 state_not_durable until a write succeeds again', async (t) => {
  t.equal((await readyz()).status, 200)
  t.equal((await request(ctl.port, pki.ca, a, '/v1/checkin', { body: checkinBody('node-a') })).status, 200)
  faulty!.failing = true
  t.equal((await request(ctl.port, pki.ca, b, '/v1/checkin', { body: checkinBody('node-b') })).status, 503)
  const res = await readyz()
  t.equal(res.status, 503)
  t.same(res.json, { status: 'not_ready', reasons: ['state_not_durable'] })
  const s = await scrape(opsPort)
  t.equal(s.value('pxe_ready'), 0)
  t.ok((s.value('pxe_state_write_failures_total') ?? 0) >= 1)
  t.equal((await opsRequest(opsPort, '/healthz')).status, 200, 'still alive: only not ready')

  faulty!.failing = false
  t.ok(await eventually(5000, isReady), 'ready again once the retry succeeds')
  t.equal((await scrape(opsPort)).value('pxe_ready'), 1)
})

t.test('CRL past nextUpdate: 503 crl_past_next_update, and every handshake fails with crl_expired', async (t) => {
  // A CRL issued "a day ago" for one day: its nextUpdate is a few seconds from now.
  await writeCrl(pki.dir, { crlDays: 1, now: new Date(Date.now() - 86_400_000 + 3000) })
  const before = await scrape(opsPort)
  t.ok(await eventually(5000, async () => (await scrape(opsPort)).value('pxe_crl_next_update_timestamp_seconds')! < Date.now() / 1000 + 10), 'the short-lived CRL is in force')
  t.ok(await eventually(8000, async () => !(await isReady())), 'not ready once nextUpdate passed')
  const res = await readyz()
  t.same(res.json, { status: 'not_ready', reasons: ['crl_past_next_update'] })
  await t.rejects(request(ctl.port, pki.ca, a, '/v1/keys'), 'OpenSSL refuses a valid client while the CRL is stale')
  t.ok(await eventually(2000, async () => (await scrape(opsPort)).count('pxe_tls_handshake_failures_total', { reason: 'crl_expired' }) > before.count('pxe_tls_handshake_failures_total', { reason: 'crl_expired' })), 'counted as crl_expired')

  await writeCrl(pki.dir) // a fresh CRL heals it
  t.ok(await eventually(5000, isReady), 'ready again with a fresh CRL')
  t.equal((await request(ctl.port, pki.ca, a, '/v1/keys')).status, 200)
})

t.test('mTLS listener down: 503 mtls_listener_down', async (t) => {
  const dir = testDir(t)
  const other = await startTestController(pki, dir)
  t.equal((await opsRequest(other.opsPort!, '/readyz')).status, 200)
  await new Promise<void>((resolve) => other.running.app.server.close(() => resolve())) // the listening socket goes away
  const res = await opsRequest(other.opsPort!, '/readyz')
  t.equal(res.status, 503)
  t.same(res.json, { status: 'not_ready', reasons: ['mtls_listener_down'] })
  t.equal((await scrape(other.opsPort!)).value('pxe_ready'), 0)
  await other.running.stop()
})
