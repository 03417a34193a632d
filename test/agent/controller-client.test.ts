// The controller client over real mTLS against stand-in servers: one keep-alive connection, 429 waits
// read from the body or the header, a controller whose certificate is not from our CA, the TLS session
// offered to the next controller URL after a failover (HA replicas share ticket keys), and when a refused
// certificate is definitive (every URL, on new connections, twice in a row) or only probable.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import tls from 'node:tls'
import { SharedSessions } from '../../src/agent/busy-aware-agent.js'
import { systemClock } from '../../src/agent/clock.js'
import { CertificateRefusedError, ControllerClient, ControllerUnreachableError } from '../../src/agent/controller-client.js'
import { makePki } from '../e2e/harness.js'
import { fakeController, nodeIdentity, urlOf } from './support.js'
import { opensslRefuser } from './openssl-refuser.js'
import { closedPort } from '../support/closed-port.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const stranger = await makePki(join(root, 'stranger'))
const id = await nodeIdentity(pki, 'node-a')
const client = (urls: string[]) => new ControllerClient({ urls, ca: id.ca, cert: id.cert, key: id.key, clock: systemClock, requestTimeoutMs: () => 5000 })

t.test('requests share one keep-alive mTLS connection', async (t) => {
  const fake = await fakeController(pki, () => ({ status: 200, body: { ok: true } }))
  t.teardown(() => fake.close())
  const c = client([urlOf(fake.port)])
  t.teardown(() => c.close())
  for (let i = 0; i < 5; i++) t.equal((await c.post('/v1/checkin', {})).status, 200)
  t.equal(fake.connections(), 1, 'five requests, one TLS connection')
  t.same(fake.seen, Array(5).fill('node-a POST /v1/checkin'), 'the server saw our certificate')
})

t.test('429: the wait comes from retry_after_ms, else from Retry-After; no failover', async (t) => {
  let withBody = true
  const fake = await fakeController(pki, () =>
    withBody
      ? { status: 429, body: { error: 'rate_limited', message: 'slow down', retry_after_ms: 1234 }, headers: { 'retry-after': '2' } }
      : { status: 429, body: { error: 'rate_limited', message: 'slow down' }, headers: { 'retry-after': '3' } },
  )
  t.teardown(() => fake.close())
  const other = await fakeController(pki, () => ({ status: 200, body: {} }))
  t.teardown(() => other.close())
  const c = client([urlOf(fake.port), urlOf(other.port)])
  t.teardown(() => c.close())
  const first = await c.post('/v1/identify', {})
  t.equal(first.status, 429)
  t.equal(first.errorCode, 'rate_limited')
  t.equal(first.retryAfterMs, 1234, 'the body wins (it is exact)')
  withBody = false
  t.equal((await c.post('/v1/identify', {})).retryAfterMs, 3000, 'the header in whole seconds')
  t.equal(other.seen.length, 0, 'a 429 is an answer: no failover')
})

t.test('a controller whose certificate is not from our CA is never trusted', async (t) => {
  const impostor = await fakeController(pki, () => ({ status: 200, body: {} }), stranger)
  t.teardown(() => impostor.close())
  const c = client([urlOf(impostor.port)])
  t.teardown(() => c.close())
  const error = await c.post('/v1/checkin', {}).catch((err: unknown) => err)
  t.ok(error instanceof ControllerUnreachableError)
  const attempt = (error as ControllerUnreachableError).attempts[0]
  t.equal(attempt?.failure, 'server_untrusted', attempt?.detail ?? '')
  t.equal(impostor.seen.length, 0, 'no request reached it')
})

t.test('requests queued behind another on the keep-alive connection leave no listener on its socket', async (t) => {
  const fake = await fakeController(pki, () => ({ status: 200, body: { ok: true } }))
  t.teardown(() => fake.close())
  const c = client([urlOf(fake.port)])
  t.teardown(() => c.close())
  const warnings: string[] = []
  const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`)
  process.on('warning', onWarning)
  t.teardown(() => process.off('warning', onWarning))
  await c.post('/v1/checkin', {})
  // One socket (maxSockets 1): 30 requests at once queue behind each other, as claims do behind a check-in.
  for (let round = 0; round < 3; round++) {
    const replies = await Promise.all(Array.from({ length: 10 }, () => c.post('/v1/identify', {})))
    t.ok(replies.every((r) => r.status === 200))
  }
  await new Promise((r) => setImmediate(r))
  t.same(warnings.filter((w) => w.includes('MaxListeners')), [], 'no listener piles up on the shared socket')
  t.equal(fake.connections(), 1, 'still one TLS connection')
})

t.test('after a failover the session made with one controller resumes on the next (replicas sharing ticket keys)', async (t) => {
  const ticketKeys = randomBytes(48)
  const ok = () => ({ status: 200, body: {} })
  const leader = await fakeController(pki, ok, pki, { ticketKeys })
  const next = await fakeController(pki, ok, pki, { ticketKeys })
  t.teardown(() => next.close())
  const c = client([urlOf(leader.port), urlOf(next.port)])
  t.teardown(() => c.close())
  t.equal((await c.post('/v1/checkin', {})).status, 200)
  await leader.close() // the leader is gone (kill -9): its connection with it
  t.equal((await c.post('/v1/checkin', {})).status, 200, 'the next controller answers')
  t.equal(next.connections(), 1)
  t.equal(next.resumed(), 1, "the leader's session resumed: no full handshake")

  // without shared keys the ticket is of no use to a server: a full handshake, nothing else changes
  const stranger = await fakeController(pki, ok, pki, { ticketKeys: randomBytes(48) })
  t.teardown(() => stranger.close())
  const c2 = client([urlOf(next.port), urlOf(stranger.port)])
  t.teardown(() => c2.close())
  t.equal((await c2.post('/v1/checkin', {})).status, 200)
  await next.close()
  t.equal((await c2.post('/v1/checkin', {})).status, 200)
  t.equal(stranger.resumed(), 0, 'a server without the keys makes a full handshake')
})

t.test('a shared session is offered only to hosts its certificate is valid for', async (t) => {
  const fake = await fakeController(pki, () => ({ status: 200, body: {} }))
  t.teardown(() => fake.close())
  const sessions = new SharedSessions()
  t.equal(sessions.sessionFor('127.0.0.1'), undefined, 'none before any session')
  await new Promise<void>((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: fake.port, ca: id.ca, cert: id.cert, key: id.key })
    socket.once('session', (session: Buffer) => {
      sessions.note(socket, session)
      socket.destroy()
      resolve()
    })
    socket.once('error', reject)
  })
  t.type(sessions.sessionFor('127.0.0.1'), Buffer, 'the controller certificate names 127.0.0.1')
  t.equal(sessions.sessionFor('10.9.9.9'), undefined, 'another host: not offered (its resumption would fail the name check)')
})

const UNAUTHENTICATED = { status: 401, body: { error: 'unauthenticated', message: 'a valid client certificate issued by this controller is required' } }

t.test('a 401 on a kept-alive connection is asked again on a new connection; only that answer counts', async (t) => {
  let n = 0
  // the second request (on the kept-alive connection) is refused; the controller serves the next one
  const fake = await fakeController(pki, () => ((n += 1) === 2 ? UNAUTHENTICATED : { status: 200, body: { n } }))
  t.teardown(() => fake.close())
  const c = client([urlOf(fake.port)])
  t.teardown(() => c.close())
  t.equal((await c.post('/v1/checkin', {})).status, 200)
  const second = await c.post('/v1/checkin', {}).catch((err: unknown) => err)
  t.notOk(second instanceof Error, `not a refusal: ${String(second)}`)
  t.same((second as { body: unknown }).body, { n: 3 }, 'the answer on the new connection')
  t.equal(fake.connections(), 2, 'the refusal was asked again on a new connection')
})

t.test("one controller's refusal fails over: another URL that answers is used", async (t) => {
  const refusing = await fakeController(pki, () => UNAUTHENTICATED)
  t.teardown(() => refusing.close())
  const serving = await fakeController(pki, () => ({ status: 200, body: {} }))
  t.teardown(() => serving.close())
  // a replica with the wrong CA: the TLS alert "unknown ca"
  const wrongCa = await opensslRefuser(pki, { clientCaFile: join(stranger.dir, 'ca.pem') })
  t.teardown(() => wrongCa.close())
  const c = client([urlOf(refusing.port), urlOf(wrongCa.port), urlOf(serving.port)])
  t.teardown(() => c.close())
  const reply = await c.post('/v1/checkin', {})
  t.equal(reply.status, 200)
  t.equal(reply.url, urlOf(serving.port))
  t.equal(c.currentUrl, urlOf(serving.port), 'the next request starts with the controller that answered')
  t.equal(refusing.seen.length, 1, 'the refusing controller was asked once')
})

t.test('some controllers refuse, another cannot be reached: probable, not definitive', async (t) => {
  const refusing = await fakeController(pki, () => UNAUTHENTICATED)
  t.teardown(() => refusing.close())
  const c = client([urlOf(refusing.port), urlOf(await closedPort())])
  t.teardown(() => c.close())
  const error = await c.post('/v1/checkin', {}).catch((err: unknown) => err)
  t.ok(error instanceof ControllerUnreachableError, String(error))
  const unreachable = error as ControllerUnreachableError
  t.ok(unreachable.probableRefusal, 'a probable refusal')
  t.same(unreachable.refusals.map((a) => [a.url, a.failure, a.detail]), [[urlOf(refusing.port), 'certificate_refused', '401 unauthenticated']])
  t.same(unreachable.attempts.map((a) => a.failure), ['certificate_refused', 'connect'])
})

t.test('every controller refuses on new connections twice in a row (a 401, a TLS alert): definitive', async (t) => {
  const one = await fakeController(pki, () => UNAUTHENTICATED)
  t.teardown(() => one.close())
  const two = await fakeController(pki, () => UNAUTHENTICATED)
  t.teardown(() => two.close())
  const wrongCa = await opensslRefuser(pki, { clientCaFile: join(stranger.dir, 'ca.pem') })
  t.teardown(() => wrongCa.close())
  const c = client([urlOf(one.port), urlOf(two.port), urlOf(wrongCa.port)])
  t.teardown(() => c.close())
  const error = await c.post('/v1/checkin', {}).catch((err: unknown) => err)
  t.ok(error instanceof CertificateRefusedError, String(error))
  const refused = error as CertificateRefusedError
  t.same(refused.refusals.map((a) => [a.url, a.detail]), [
    [urlOf(two.port), '401 unauthenticated'],
    [urlOf(wrongCa.port), 'TLS alert unknown ca'],
    [urlOf(one.port), '401 unauthenticated'],
  ], 'the confirming round, from the URL after the one that began the first')
  t.match(refused.message, /^every controller refused this node's certificate/)
  t.equal(one.seen.length, 2, 'each controller asked twice')
  t.equal(two.seen.length, 2)
  t.equal(one.connections(), 2, 'each time on a new connection')
  t.equal(two.connections(), 2)
})

t.test('every controller refusing once, then one serving: no refusal at all', async (t) => {
  let n = 0
  const flaky = await fakeController(pki, () => ((n += 1) === 1 ? UNAUTHENTICATED : { status: 200, body: {} }))
  t.teardown(() => flaky.close())
  const c = client([urlOf(flaky.port)])
  t.teardown(() => c.close())
  t.equal((await c.post('/v1/checkin', {})).status, 200, 'the confirming round was answered')
  t.equal(flaky.connections(), 2)
})
