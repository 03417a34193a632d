// The ceiling's renewal price (bench/renewal-cost.ts) against a real controller over mTLS: each
// connection checks in at its share of a fleet's pace, one check-in at a time, and a refused renewal
// stops the measurement with the status instead of being priced.
import t from 'tap'
import type { ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import tls from 'node:tls'
import { bundle, checkinBody, makePki, startTestController } from '../e2e/harness.js'
import { testDir } from '../support/test-dir.js'
import { measureRenewalCost, RENEWAL_PACE_PER_S } from '../../bench/renewal-cost.js'
import type { Identity } from '../../bench/mtls-client.js'
import type { Target } from '../../bench/mtls-process.js'

const root = testDir(t)
const pki = await makePki(root)
const names = ['compaq-01', 'compaq-02', 'compaq-03', 'compaq-04']
const ids: Identity[] = []
for (const name of names) {
  const b = await bundle(pki, name, 'node')
  ids.push({ name, cert: Buffer.from(b.cert), key: Buffer.from(b.key) })
}
const ctl = await startTestController(pki, root, { rate_limits: { node: { per_second: 1_000_000, burst: 1_000_000 }, operator: { per_second: 10, burst: 10 } } })
t.teardown(() => ctl.running.stop())
const ca = Buffer.from(pki.ca)

function request(nodeId: string): Buffer {
  const body = JSON.stringify(checkinBody(nodeId))
  return Buffer.from(`POST /v1/checkin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, 'latin1')
}

/** A target whose "CPU" is wall time: the price per check-in then reads back the pacing itself. */
function wallClockTarget(): Target {
  return { kind: 'controller', key: 'ec', port: ctl.port, child: null as unknown as ChildProcess, cpuMicros: async () => performance.now() * 1000 }
}

t.test('connections check in at their share of the pace: 1,000 check-ins a second in all', async (t) => {
  const msPerCheckin = await measureRenewalCost(wallClockTarget(), ca, ids, ids.map((id) => request(id.name)), { warmupMs: 300, rounds: 2, ms: 500 })
  // wall time per check-in = 1 / pace when the pace is kept (each connection waits out its gap)
  const expected = 1000 / RENEWAL_PACE_PER_S
  t.ok(msPerCheckin >= expected * 0.9, `not faster than the pace (${msPerCheckin.toFixed(3)} ms per check-in)`)
  // how close it comes depends on the machine's load (speed is measured by npm run bench, never asserted here)
  t.comment(`${msPerCheckin.toFixed(3)} ms per check-in against ${expected.toFixed(3)} ms at the pace`)
})

t.test('a renewal the target refuses ends the measurement with its status', async (t) => {
  // compaq-02's certificate checking in as compaq-01: refused, never priced
  const requests = ids.map(() => request('compaq-01'))
  await t.rejects(measureRenewalCost(wallClockTarget(), ca, ids, requests, { warmupMs: 100, rounds: 1, ms: 200 }), /answered a renewal with 403/)
})

t.test('a target that stops answering fails the measurement instead of hanging it', async (t) => {
  // completes the handshake with a client certificate, reads the request, never answers
  const silent = tls.createServer({ ca: pki.ca, cert: readFileSync(join(pki.dir, 'server.pem')), key: readFileSync(join(pki.dir, 'server-key.pem')), requestCert: true, rejectUnauthorized: true }, (socket) => socket.resume())
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => silent.close(() => resolve())))
  const port = (silent.address() as { port: number }).port
  const target: Target = { kind: 'ceiling', key: 'ec', port, child: null as unknown as ChildProcess, cpuMicros: async () => performance.now() * 1000 }
  const started = performance.now()
  await t.rejects(measureRenewalCost(target, ca, ids, ids.map((id) => request(id.name)), { warmupMs: 100, rounds: 1, ms: 200, answerTimeoutMs: 400 }), /ceiling \(ec\): a renewal got no answer within 400 ms/)
  t.ok(performance.now() - started < 5000, 'stopped at the timeout')
})
