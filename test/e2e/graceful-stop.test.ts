// Graceful stop of the real process (issue 10 item 4): on SIGTERM/SIGINT the controller stops accepting,
// closes idle connections, lets a request in flight finish (its body half sent when the signal came),
// cuts a stuck one after the grace period, makes state durable, audits controller_stop and exits 0. A
// second signal exits at once, non-zero.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { connect as tcpConnect } from 'node:net'
import tls, { type TLSSocket } from 'node:tls'
import { join } from 'node:path'
import { bundle, checkinBody, makePki, writeTestConfig, type Identity } from './harness.js'
import { spawnController, type ChildController } from './process.js'
import { eventually, opsRequest } from '../ops/scrape.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const a = await bundle(pki, 'node-a', 'node')
const configPath = writeTestConfig(pki, root, { lease_seconds: 3600 })
const auditLines = () => readFileSync(join(root, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l))

/** A raw mTLS connection that records everything the server sends. */
async function open(port: number, id: Identity): Promise<{ socket: TLSSocket; received: () => string; closed: Promise<void> }> {
  const socket = tls.connect({ host: '127.0.0.1', port, ca: pki.ca, cert: id.cert, key: id.key })
  await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject))
  let text = ''
  socket.on('data', (d: Buffer) => (text += d.toString('utf8')))
  socket.on('error', () => undefined) // a cut connection is what some tests expect
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  return { socket, received: () => text, closed }
}

/** Sends a check-in's headers (with Expect: 100-continue) and the first half of its body; resolves once the server took the request. */
async function startCheckin(port: number): Promise<{ conn: Awaited<ReturnType<typeof open>>; rest: string }> {
  const conn = await open(port, a)
  const body = JSON.stringify(checkinBody('node-a'))
  const half = Math.floor(body.length / 2)
  conn.socket.write(`POST /v1/checkin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\n\r\n`)
  // Node answers 100 Continue when it hands the request to fastify: from then on it is in flight.
  if (!(await eventually(5000, () => conn.received().includes('100 Continue')))) throw new Error('no 100 Continue')
  conn.socket.write(body.slice(0, half))
  return { conn, rest: body.slice(half) }
}

const waitForLog = (ctl: ChildController, pattern: RegExp) => eventually(10_000, () => pattern.test(ctl.stdout()))

/** True once a new TCP connection to the port is refused. */
const refusesConnections = (port: number) =>
  eventually(5000, () => new Promise<boolean>((resolve) => {
    const s = tcpConnect(port, '127.0.0.1')
    s.once('connect', () => (s.destroy(), resolve(false)))
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'))
  }))

t.test('SIGTERM: a request in flight gets its answer, idle connections close, state durable, exit 0', async (t) => {
  const ctl = await spawnController(['--config', configPath], root)
  t.teardown(() => void ctl.child.kill('SIGKILL'))
  const idle = await open(ctl.port, a)
  idle.socket.write('GET /v1/keys HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
  t.ok(await eventually(5000, () => /^HTTP\/1\.1 200 /.test(idle.received())), 'a keep-alive connection, now idle')
  const { conn, rest } = await startCheckin(ctl.port)

  ctl.child.kill('SIGTERM')
  t.ok(await waitForLog(ctl, /"msg":"stopping: no new connections/), 'the stop began')
  await idle.closed
  t.pass('the idle keep-alive connection was closed at once')
  t.ok(await refusesConnections(ctl.port), 'new connections are refused')
  const ready = await opsRequest(ctl.opsPort!, '/readyz')
  t.equal(ready.status, 503, 'probes see the stop while requests drain')
  t.match(ready.json.reasons, ['mtls_listener_down', 'stopping'])

  conn.socket.write(rest) // the second half of the body arrives after the signal
  await conn.closed
  const answer = conn.received()
  t.match(answer, /HTTP\/1\.1 200 OK/, 'the check-in in flight got its 200')
  t.match(answer, /\r\nconnection: close\r\n/i, 'and was told the connection ends with it')
  t.match(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n{') + 4)), { generation: 1, range_start: 0, range_count: 16 })
  t.equal(await ctl.exited, 0, 'exit 0')
  t.notMatch(ctl.stdout(), /after the grace period/, 'nothing had to be cut')
  const last = auditLines().at(-1)
  t.match(last, { event: 'controller_stop', generation: 1, connections_cut: 0 })
  const state = JSON.parse(readFileSync(join(root, 'state', 'state.json'), 'utf8'))
  t.same(state.body.nodes.map((n: { nodeId: string }) => n.nodeId), ['node-a'], 'the check-in answered during the stop is durable')
})

t.test('a stuck request does not hold the stop: cut after the grace period, still exit 0', async (t) => {
  const ctl = await spawnController(['--config', configPath], root)
  t.teardown(() => void ctl.child.kill('SIGKILL'))
  const { conn } = await startCheckin(ctl.port) // the rest never comes
  ctl.child.kill('SIGTERM')
  await conn.closed
  t.notMatch(conn.received(), /HTTP\/1\.1 [2-5]\d\d /, 'no answer: the connection was cut')
  t.equal(await ctl.exited, 0)
  t.match(ctl.stdout(), /"connections":1,"graceMs":5000,"msg":"stop: requests still in flight after the grace period/)
  t.match(auditLines().at(-1), { event: 'controller_stop', connections_cut: 1 })
})

t.test('a second signal exits at once, non-zero', async (t) => {
  const ctl = await spawnController(['--config', configPath], root)
  t.teardown(() => void ctl.child.kill('SIGKILL'))
  await startCheckin(ctl.port) // holds the graceful stop
  const auditBefore = auditLines().length
  ctl.child.kill('SIGINT')
  t.ok(await waitForLog(ctl, /"msg":"stopping: no new connections/))
  ctl.child.kill('SIGINT')
  t.equal(await ctl.exited, 130, '128 + SIGINT')
  t.match(ctl.stdout(), /"msg":"second signal: exiting at once/)
  t.notMatch(ctl.stdout(), /after the grace period/, 'it did not wait for the grace period')
  t.equal(auditLines().length, auditBefore, 'no controller_stop: the stop did not complete')
})
