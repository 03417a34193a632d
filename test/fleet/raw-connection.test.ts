// The fleet benchmark's light-node connection (bench/fleet/scale/raw-connection.ts) against a real
// controller over mTLS: a deferral reaches it as the agent's ControllerBusyError with the appointment,
// an admitted connection is served, and a reconnect resumes the TLS session.
import t from 'tap'
import net from 'node:net'
import { createSecureContext } from 'node:tls'
import { bundle, checkinBody, makePki, startTestController } from '../e2e/harness.js'
import { testDir } from '../support/test-dir.js'
import { closedPort } from '../support/closed-port.js'
import { ControllerBusyError } from '../../src/agent/busy-aware-agent.js'
import { RawConnection } from '../../bench/fleet/scale/raw-connection.js'

const root = testDir(t)
const pki = await makePki(root)
const node = await bundle(pki, 'compaq-01', 'node')
// One handshake in flight is the most this controller finishes in time (every loop counts as saturated).
const ctl = await startTestController(pki, root, {}, { admission: { minInFlight: 1, budgetMs: 0, returningBudgetMs: 0, busyUtilization: 0, minDeferMs: 250 } })
t.teardown(() => ctl.running.stop())
const context = createSecureContext({ ca: pki.ca, cert: node.cert, key: node.key, minVersion: 'TLSv1.2' })

function checkin(): Buffer {
  const body = JSON.stringify(checkinBody('compaq-01'))
  return Buffer.from(`POST /v1/checkin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, 'latin1')
}

let session: Buffer | undefined
const open = () => RawConnection.open({ port: ctl.port, context, localAddress: '127.0.0.1', timeoutMs: 5000, session, onSession: (s) => void (session = s) })

t.test('deferred: the busy notice is read as ControllerBusyError with its appointment', async (t) => {
  const stalled = net.connect(ctl.port, '127.0.0.1') // a handshake in flight
  await new Promise((resolve) => stalled.once('connect', resolve))
  await new Promise((resolve) => setTimeout(resolve, 50))
  const err = await open().then(() => null, (e: unknown) => e)
  t.ok(err instanceof ControllerBusyError, String(err))
  t.ok(((err as ControllerBusyError).retryAfterMs ?? 0) >= 250, `appointment ${(err as ControllerBusyError).retryAfterMs} ms`)
  stalled.destroy()
  await new Promise((resolve) => setTimeout(resolve, 200))
})

t.test('admitted: a check-in is answered; the next connection resumes the session', async (t) => {
  const first = await open()
  t.notOk(first.socket.isSessionReused())
  t.ok(first.tcpMs >= 0 && first.tlsMs > 0, `the opening is timed: TCP ${first.tcpMs.toFixed(1)} ms, TLS ${first.tlsMs.toFixed(1)} ms`)
  const reply = await first.send(checkin(), 5000)
  t.equal(reply.status, 200, reply.body.toString('utf8'))
  t.equal((JSON.parse(reply.body.toString('utf8')) as { generation: number }).generation, 1)
  first.close()
  t.ok(session, 'a session ticket was kept')
  await new Promise((resolve) => setTimeout(resolve, 200)) // the closed one leaves the controller's count
  const second = await open()
  t.ok(second.socket.isSessionReused(), 'resumed')
  t.equal((await second.send(checkin(), 5000)).status, 200)
  second.close()
})

t.test('a refused connection (nothing listening) rejects with its error code', async (t) => {
  const port = await closedPort()
  const err = await RawConnection.open({ port, context, localAddress: '127.0.0.1', timeoutMs: 2000 }).then(() => null, (e: unknown) => e)
  t.equal((err as NodeJS.ErrnoException).code, 'ECONNREFUSED')
})
