// Admission reads which handshakes in flight are queued work, over real sockets: a connection the
// controller has not answered yet (nothing from its client, or only part of a ClientHello) counts
// against the budget while it is new, since the work its ClientHello brings is still to come; one whose
// ClientHello was answered waits for its client, so it does not keep an idle loop from admitting nodes.
import t from 'tap'
import net from 'node:net'
import tls from 'node:tls'
import { once } from 'node:events'
import { Duplex } from 'node:stream'
import { bundle, checkinBody, makePki, opsMetric, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'
import { ControllerClient, ControllerUnreachableError } from '../../src/agent/controller-client.js'
import { systemClock } from '../../src/agent/clock.js'

const root = testDir(t)
const pki = await makePki(root)
const node = await bundle(pki, 'compaq-01', 'node')
// The loop always counts as idle (utilization never reaches 1.01), and one handshake in flight at the
// assumed 20 s is past the 10 s a returning client may queue for: whether a new connection is admitted
// depends only on the unanswered ones among the connections admitted during the last 5 s.
const BUDGET_MS = 5000
const ctl = await startTestController(pki, root, {}, { admission: { minInFlight: 1, budgetMs: BUDGET_MS, returningBudgetMs: 10_000, initialCostMs: 20_000, busyUtilization: 1.01, minDeferMs: 250 } })
t.teardown(() => ctl.running.stop())

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
/** Long enough for the controller to accept, read what was sent, answer it, and count at the end of a 250 ms window. */
const SETTLE_MS = 600

const metric = (name: string): Promise<number> => opsMetric(ctl, name)

async function inFlightBecomes(n: number): Promise<void> {
  for (let i = 0; (await metric('pxe_tls_handshakes_in_flight')) !== n; i++) {
    if (i > 50) throw new Error(`the handshakes in flight did not become ${n}`)
    await sleep(100)
  }
}

/** A TCP connection that sends `first` (nothing: no ClientHello at all) and then stalls. */
async function stalledConnection(first?: Buffer): Promise<net.Socket> {
  const socket = net.connect(ctl.port, '127.0.0.1')
  socket.on('error', () => undefined)
  await once(socket, 'connect')
  if (first !== undefined) socket.write(first)
  await sleep(SETTLE_MS)
  return socket
}

/**
 * A real TLS client whose ClientHello reaches the controller and is answered, but whose next flight
 * (its certificate and Finished) never leaves: a handshake in flight that waits for its client.
 */
async function answeredConnection(): Promise<() => void> {
  const raw = net.connect(ctl.port, '127.0.0.1')
  raw.on('error', () => undefined)
  await once(raw, 'connect')
  let writes = 0
  const transport = new Duplex({
    read() {
      raw.resume()
    },
    write(chunk: Buffer, _encoding, callback) {
      if (writes++ === 0) raw.write(chunk, callback)
      else callback() // held back: the controller never sees the client's second flight
    },
    destroy(err, callback) {
      raw.destroy()
      callback(err)
    },
  })
  raw.on('data', (chunk: Buffer) => {
    if (!transport.push(chunk)) raw.pause()
  })
  const client = tls.connect({ socket: transport, host: '127.0.0.1', ca: pki.ca, cert: node.cert, key: node.key })
  client.on('error', () => undefined)
  await sleep(SETTLE_MS)
  return () => {
    client.destroy()
    raw.destroy()
  }
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

t.test('a new connection that sent nothing is queued work: the next one is deferred until it is no longer new', async (t) => {
  const startedAt = Date.now()
  const silent = await stalledConnection()
  t.teardown(() => silent.destroy())
  t.equal(await metric('pxe_tls_handshakes_in_flight'), 1)
  const deferredBefore = await metric('pxe_connections_deferred_total')
  t.equal(await checkIn(), 'busy', 'deferred behind the silent one')
  t.equal(await metric('pxe_connections_deferred_total'), deferredBefore + 1)
  // older than the budget (and one more window): a stalled peer now, not a handshake about to arrive
  await sleep(Math.max(0, startedAt + BUDGET_MS + 500 - Date.now()))
  t.equal(await checkIn(), 'answered', 'an old silent connection no longer keeps nodes out')
  silent.destroy()
  await inFlightBecomes(0)
})

t.test('part of a ClientHello is not yet an answered one: it counts as queued work too', async (t) => {
  // A TLS handshake record header announcing 512 bytes, and nothing more: read, but nothing to answer yet.
  const partial = await stalledConnection(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00]))
  t.teardown(() => partial.destroy())
  t.equal(await metric('pxe_tls_handshakes_in_flight'), 1, 'still in its handshake')
  t.equal(await checkIn(), 'busy', 'deferred: a client trickling its ClientHello holds a place as one that sent nothing does')
  partial.destroy()
  await inFlightBecomes(0)
})

t.test('a connection whose ClientHello was answered waits for its client: a new one is admitted at once', async (t) => {
  const close = await answeredConnection()
  t.teardown(close)
  t.equal(await metric('pxe_tls_handshakes_in_flight'), 1, 'still in its handshake, waiting for the client')
  const deferredBefore = await metric('pxe_connections_deferred_total')
  t.equal(await checkIn(), 'answered', 'admitted: the one in flight waits for its client, not for the loop')
  t.equal(await metric('pxe_connections_deferred_total'), deferredBefore, 'nothing deferred')
  t.equal(await metric('pxe_tls_handshakes_in_flight'), 1, 'and that one is still waiting')
})
