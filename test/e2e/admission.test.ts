// Admission under a reconnect storm, over real sockets: a controller that cannot finish more handshakes
// in time answers a new connection with the busy notice before any TLS work; the agent's client reads
// the appointment; nothing is audited as a refused handshake; admitted connections are served as ever.
import t from 'tap'
import net from 'node:net'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { bundle, checkinBody, makePki, opsMetric, request, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'
import { ControllerClient, ControllerUnreachableError } from '../../src/agent/controller-client.js'
import { systemClock } from '../../src/agent/clock.js'

const root = testDir(t)
const pki = await makePki(root)
const node = await bundle(pki, 'compaq-01', 'node')
// Every loop counts as saturated and one handshake in flight is the most it can finish in time.
const ctl = await startTestController(pki, root, {}, { admission: { minInFlight: 1, budgetMs: 0, returningBudgetMs: 0, busyUtilization: 0, minDeferMs: 250 } })
t.teardown(() => ctl.running.stop())

const client = new ControllerClient({ urls: [`https://127.0.0.1:${ctl.port}`], ca: pki.ca, cert: node.cert, key: node.key, clock: systemClock, requestTimeoutMs: () => 5000 })
t.teardown(() => client.close())

const metric = (name: string): Promise<number> => opsMetric(ctl, name)

/** A TCP connection that never sends its ClientHello: a handshake in flight. */
async function stalledConnection(): Promise<net.Socket> {
  const socket = net.connect(ctl.port, '127.0.0.1')
  await new Promise((resolve) => socket.once('connect', resolve))
  await new Promise((resolve) => setTimeout(resolve, 50)) // accepted on the controller's side
  return socket
}

t.test('with the budget spent, a new connection is deferred with an appointment, before TLS', async (t) => {
  const stalled = await stalledConnection()
  const err = await client.post('/v1/checkin', checkinBody('compaq-01')).then(() => null, (e: unknown) => e)
  t.ok(err instanceof ControllerUnreachableError, String(err))
  const unreachable = err as ControllerUnreachableError
  t.equal(unreachable.attempts[0]?.failure, 'busy')
  t.ok((unreachable.busyRetryAfterMs ?? 0) >= 250, `appointment ${unreachable.busyRetryAfterMs} ms`)
  t.equal(await metric('pxe_connections_deferred_total'), 1)
  t.ok(await metric('pxe_connection_cost_seconds') > 0)
  t.equal(await metric('pxe_tls_handshakes_in_flight'), 1, 'the stalled connection is the queue admission counts; the deferred one is not in it')
  const utilization = await metric('pxe_event_loop_utilization_ratio')
  t.ok(utilization >= 0 && utilization <= 1, `event-loop utilization ${utilization}`)
  // A plain TLS client sees a protocol error, nothing worse.
  await t.rejects(request(ctl.port, pki.ca, node, '/v1/plan'), /wrong version number/)
  const audit = readFileSync(join(root, 'audit.log'), 'utf8')
  t.notMatch(audit, /tls_rejected/, 'a deferral is no refused handshake: nothing audited')

  stalled.destroy()
  await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal(await metric('pxe_tls_handshakes_in_flight'), 0, 'a closed connection leaves the queue')
  const reply = await client.post('/v1/checkin', checkinBody('compaq-01'))
  t.equal(reply.status, 200, 'once the handshake in flight is gone, the next connection is admitted')
  t.equal((reply.body as { generation: number }).generation, 1)
})

t.test('a busy notice ends the attempt (twice in a row at most): no other controller URL is tried, and the next attempt starts with the busy one', async (t) => {
  // A second "replica" that only counts connections: in HA it would be a follower, which would answer
  // 503 after a handshake of its own, on the cores the busy leader needs.
  let connections = 0
  const other = net.createServer((socket) => {
    connections += 1
    socket.destroy()
  })
  await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => other.close(() => resolve())))
  const busyUrl = `https://127.0.0.1:${ctl.port}`
  const otherUrl = `https://127.0.0.1:${(other.address() as net.AddressInfo).port}`
  const two = new ControllerClient({ urls: [busyUrl, otherUrl], ca: pki.ca, cert: node.cert, key: node.key, clock: systemClock, requestTimeoutMs: () => 5000 })
  t.teardown(() => two.close())
  const stalled = await stalledConnection()
  const post = () => two.post('/v1/checkin', checkinBody('compaq-01', { generation: 1 })).then(() => null, (e: unknown) => e)
  for (const round of [1, 2]) {
    const err = await post()
    t.ok(err instanceof ControllerUnreachableError, `attempt ${round}: ${String(err)}`)
    const attempts = (err as ControllerUnreachableError).attempts
    t.same(attempts.map((a) => [a.url, a.failure]), [[busyUrl, 'busy']], `attempt ${round}: the busy controller only`)
    t.ok(((err as ControllerUnreachableError).busyRetryAfterMs ?? 0) >= 250, 'with its appointment')
    t.equal(two.currentUrl, busyUrl, `attempt ${round}: the next attempt starts with it`)
  }
  t.equal(connections, 0, 'the other URL was not tried')
  // The notice is plaintext: whoever answers a URL's address can send it every time. The third busy
  // attempt in a row fails over as after a connection error, so a forged notice cannot keep a node
  // from its other controllers.
  const third = await post()
  t.ok(third instanceof ControllerUnreachableError)
  t.same((third as ControllerUnreachableError).attempts.map((a) => a.url), [busyUrl, otherUrl], 'the third: the other URL too')
  t.equal(connections, 1)
  t.equal(two.currentUrl, otherUrl, 'and the attempt after starts there')
  stalled.destroy()
  await new Promise((resolve) => setTimeout(resolve, 100))
})

t.test('an answer starts the count of busy attempts over', async (t) => {
  const busyUrl = `https://127.0.0.1:${ctl.port}`
  const other = net.createServer((socket) => socket.destroy())
  await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => other.close(() => resolve())))
  const otherUrl = `https://127.0.0.1:${(other.address() as net.AddressInfo).port}`
  const two = new ControllerClient({ urls: [busyUrl, otherUrl], ca: pki.ca, cert: node.cert, key: node.key, clock: systemClock, requestTimeoutMs: () => 5000 })
  t.teardown(() => two.close())
  const post = () => two.post('/v1/checkin', checkinBody('compaq-01', { generation: 1 })).then(() => null, (e: unknown) => e)
  const urlsOf = (err: unknown) => (err as ControllerUnreachableError).attempts.map((a) => a.url)
  let stalled = await stalledConnection()
  t.same(urlsOf(await post()), [busyUrl], 'busy once')
  t.same(urlsOf(await post()), [busyUrl], 'busy twice')
  stalled.destroy()
  // until the controller has seen the stalled connection go, it defers: wait with another client
  const probe = new ControllerClient({ urls: [busyUrl], ca: pki.ca, cert: node.cert, key: node.key, clock: systemClock, requestTimeoutMs: () => 5000 })
  for (let i = 0; !(await probe.post('/v1/checkin', checkinBody('compaq-01', { generation: 1 })).then(() => true, () => false)); i++) {
    if (i > 50) throw new Error('the controller kept deferring connections')
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  probe.close()
  await new Promise((resolve) => setTimeout(resolve, 100)) // the probe's connection gone on the controller's side
  t.equal(await post(), null, 'then an answer')
  t.equal(two.currentUrl, busyUrl, 'from it')
  two.close() // a fresh connection next time: a kept-alive one would not meet admission
  stalled = await stalledConnection()
  t.teardown(() => stalled.destroy())
  t.same(urlsOf(await post()), [busyUrl], 'busy again after the answer: the attempt still ends there')
  t.same(urlsOf(await post()), [busyUrl], 'and a second time: the count started over')
})

t.test('a kept-alive connection is not affected by deferrals of new ones', async (t) => {
  const stalled = await stalledConnection()
  t.teardown(() => stalled.destroy())
  const reply = await client.post('/v1/checkin', checkinBody('compaq-01', { generation: 1 }))
  t.equal(reply.status, 200, 'the agent reuses its connection: no new handshake, no admission')
})

t.test('the agent\'s connections keep their TLS sessions: a reconnect resumes (the cheap handshake a storm needs)', async (t) => {
  // The stalled connection of the test before closes asynchronously on the controller's side: until it
  // has, this controller (one handshake in flight at most) would defer us. Wait until a fresh one is admitted.
  const probe = new ControllerClient({ urls: [`https://127.0.0.1:${ctl.port}`], ca: pki.ca, cert: node.cert, key: node.key, clock: systemClock, requestTimeoutMs: () => 5000 })
  t.teardown(() => probe.close())
  for (let i = 0; ; i++) {
    const admitted = await probe.post('/v1/checkin', checkinBody('compaq-01', { generation: 1 })).then(() => true, () => false)
    if (admitted) break
    if (i > 50) throw new Error('the controller kept deferring connections')
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  probe.close()
  const { BusyAwareAgent } = await import('../../src/agent/busy-aware-agent.js')
  const https = await import('node:https')
  const agent = new BusyAwareAgent({ keepAlive: false, maxSockets: 1, ca: pki.ca, cert: node.cert, key: node.key })
  t.teardown(() => agent.destroy())
  const once = () =>
    new Promise<boolean>((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port: ctl.port, path: '/v1/keys', agent }, (res) => {
        const reused = (res.socket as import('node:tls').TLSSocket).isSessionReused()
        res.resume()
        res.on('end', () => resolve(reused))
      })
      req.on('error', reject)
      req.end()
    })
  t.equal(await once(), false, 'the first connection makes a full handshake')
  t.equal(await once(), true, 'the next one resumes the session the first was given')
})
