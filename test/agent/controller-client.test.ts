// The controller client over real mTLS against stand-in servers: one keep-alive connection, 429 waits
// read from the body or the header, a controller whose certificate is not from our CA, and the TLS session
// offered to the next controller URL after a failover (HA replicas share ticket keys).
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import tls from 'node:tls'
import { SharedSessions } from '../../src/agent/busy-aware-agent.js'
import { systemClock } from '../../src/agent/clock.js'
import { ControllerClient, ControllerUnreachableError } from '../../src/agent/controller-client.js'
import { makePki } from '../e2e/harness.js'
import { fakeController, nodeIdentity, urlOf } from './support.js'
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
