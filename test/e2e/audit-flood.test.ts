// A flood of refused handshakes from one peer: five audit lines, then the rest is counted, and the count
// reaches the log even when the controller stops before the window ends; a socket stuck before its
// handshake does not delay that stop.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { makePki, request, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const ctl = await startTestController(pki, root)

t.test('refused handshakes are audited per peer at most 5 a minute, the rest summarized at stop', async (t) => {
  for (let i = 0; i < 12; i++) {
    const res = await request(ctl.port, pki.ca, null, '/v1/keys').catch(() => null)
    t.equal(res, null, `handshake ${i + 1} without a certificate is refused`)
  }
  // A connection that never starts its TLS handshake must not hold the stop for the handshake timeout.
  const idle = connect(ctl.port, '127.0.0.1')
  await new Promise((resolve) => idle.once('connect', resolve))
  const stopStart = performance.now()
  await ctl.running.stop()
  const stopMs = performance.now() - stopStart
  t.ok(stopMs < 3000, `stop took ${Math.round(stopMs)} ms despite a socket stuck before its handshake`)
  idle.destroy()
  const lines = readFileSync(join(root, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l))
  const rejected = lines.filter((e) => e.event === 'tls_rejected')
  t.equal(rejected.filter((e) => e.reason !== undefined).length, 5, 'five lines with the reason')
  t.match(rejected.filter((e) => e.suppressed !== undefined), [{ peer: '127.0.0.1', suppressed: 7, since: String, until: String }], 'one summary line with the count')
  const stopAt = lines.findIndex((e) => e.event === 'controller_stop')
  t.ok(lines.findIndex((e) => e.suppressed !== undefined) < stopAt, 'summarized before controller_stop')
})
