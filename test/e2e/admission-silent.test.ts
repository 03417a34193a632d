// Admission reads which handshakes in flight are queued work, over real sockets: a connection whose
// client has sent nothing yet counts against the budget while it is new (its ClientHello, and the work
// it brings, are still to come); one whose first bytes arrived has had them handled and waits for its
// client, so it does not keep an idle loop from admitting nodes.
import t from 'tap'
import net from 'node:net'
import { bundle, checkinBody, makePki, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'
import { ControllerClient, ControllerUnreachableError } from '../../src/agent/controller-client.js'
import { systemClock } from '../../src/agent/clock.js'

const root = testDir(t)
const pki = await makePki(root)
const node = await bundle(pki, 'compaq-01', 'node')
// The loop always counts as idle (utilization never reaches 1.01), and one handshake in flight at the
// assumed 5 s is past the 4 s a returning client may queue for: whether a new connection is admitted depends only on the
// silent ones among the connections admitted during the last 2 s.
const ctl = await startTestController(pki, root, {}, { admission: { minInFlight: 1, budgetMs: 2000, returningBudgetMs: 4000, initialCostMs: 5000, busyUtilization: 1.01, minDeferMs: 250 } })
t.teardown(() => ctl.running.stop())

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function metric(name: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${ctl.opsPort}/metrics`)
  const line = (await res.text()).split('\n').find((l) => l.startsWith(`${name} `))
  return line === undefined ? NaN : Number(line.split(' ')[1])
}

/** A TCP connection that sends `first` (nothing: no ClientHello at all) and then stalls. */
async function stalledConnection(first?: Buffer): Promise<net.Socket> {
  const socket = net.connect(ctl.port, '127.0.0.1')
  socket.on('error', () => undefined)
  await new Promise((resolve) => socket.once('connect', resolve))
  if (first !== undefined) socket.write(first)
  await sleep(400) // accepted, its bytes read, and counted at the end of a 250 ms window
  return socket
}

/** One check-in over a fresh connection: 'answered', or 'busy' when it was deferred. */
async function checkIn(): Promise<'answered' | 'busy'> {
  const client = new ControllerClient({ urls: [`https://127.0.0.1:${ctl.port}`], ca: pki.ca, cert: node.cert, key: node.key, clock: systemClock, requestTimeoutMs: () => 5000 })
  try {
    const reply = await client.post('/v1/checkin', checkinBody('compaq-01'))
    t.equal(reply.status, 200)
    return 'answered'
  } catch (err) {
    if (err instanceof ControllerUnreachableError && err.attempts[0]?.failure === 'busy') return 'busy'
    throw err
  } finally {
    client.close()
  }
}

t.test('a silent new connection is queued work: the next one is deferred until it is no longer new', async (t) => {
  const silent = await stalledConnection()
  t.teardown(() => silent.destroy())
  t.equal(await metric('pxe_tls_handshakes_in_flight'), 1)
  const deferredBefore = await metric('pxe_connections_deferred_total')
  t.equal(await checkIn(), 'busy', 'deferred behind the silent one')
  t.equal(await metric('pxe_connections_deferred_total'), deferredBefore + 1)
  await sleep(2000) // older than the budget: a stalled peer now, not a handshake about to arrive
  t.equal(await checkIn(), 'answered', 'an old silent connection no longer keeps nodes out')
  silent.destroy()
  await sleep(100)
})

t.test('a connection whose ClientHello began to arrive waits for its client: a new one is admitted at once', async (t) => {
  // A TLS handshake record header announcing 512 bytes, and nothing more: the controller has read it and
  // waits for the rest, its handshake still in flight.
  const answered = await stalledConnection(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00]))
  t.teardown(() => answered.destroy())
  t.equal(await metric('pxe_tls_handshakes_in_flight'), 1, 'still in its handshake')
  const deferredBefore = await metric('pxe_connections_deferred_total')
  t.equal(await checkIn(), 'answered', 'admitted: the one in flight waits for its client, not for the loop')
  t.equal(await metric('pxe_connections_deferred_total'), deferredBefore, 'nothing deferred')
  t.ok(!answered.destroyed, 'the stalled one is still open')
})
