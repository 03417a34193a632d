// The fleet benchmark's light node tells its own lateness from the controller's: the answer after a mark
// records how late the check-in timer that began it fired (the load generator's event-loop lag), over
// real mTLS against a real controller; and a late node counts as late within its own lag only when that
// lag covers how late it was answered; a mark also notes how long before it the last renewal was sent.
import t from 'tap'
import { createSecureContext } from 'node:tls'
import { bundle, makePki, startTestController } from '../e2e/harness.js'
import { testDir } from '../support/test-dir.js'
import { sharedNow } from '../../bench/fleet/shared-clock.js'
import { LightNode, lateWithinOwnLag, type MarkOutcome } from '../../bench/fleet/scale/light-node.js'

const root = testDir(t)
const pki = await makePki(root)
const node = await bundle(pki, 'compaq-01', 'node')
const ctl = await startTestController(pki, root)
t.teardown(() => ctl.running.stop())
const context = createSecureContext({ ca: pki.ca, cert: node.cert, key: node.key, minVersion: 'TLSv1.2' })

async function until(what: string, ok: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

t.test('the answer after a mark carries the lag of the timer that began its check-in', async (t) => {
  const light = new LightNode('compaq-01', 8, context, '127.0.0.1', { ports: [ctl.port], count: () => undefined })
  t.teardown(() => light.stop())
  light.start(0)
  await until('the first answer', () => light.firstAnswerAt !== null)
  light.setMark()
  light.start(100) // the next check-in due in 100 ms ...
  const blockedUntil = performance.now() + 500
  while (performance.now() < blockedUntil); // ... while this process's loop is busy for 500 ms
  await until('the answer after the mark', () => light.markOutcome !== null)
  const lag = light.markOutcome!.answeredTimerLagMs
  t.ok(lag >= 300, `the timer fired ${lag.toFixed(0)} ms late`)
  t.notOk(light.markOutcome!.late, 'answered long before its fail-safe')
})

t.test('late within its own lag: only when the timer lag covers the lateness', async (t) => {
  const base: MarkOutcome = { at: 0, same: true, lostShards: 0, late: true, failSafeAfterMarkMs: 9000, attempts: {}, answeredLeadMs: 1000, answeredTookMs: 2500, answeredTcpMs: 0, answeredTlsMs: 0, answeredReplyMs: 0, answeredTimerLagMs: 0, renewalAgeAtMarkMs: 1000 }
  // began 1 s before its fail-safe, answered 2.5 s later: 1.5 s after it
  t.notOk(lateWithinOwnLag({ ...base, answeredTimerLagMs: 1499 }))
  t.ok(lateWithinOwnLag({ ...base, answeredTimerLagMs: 1500 }))
  t.notOk(lateWithinOwnLag({ ...base, late: false, answeredTimerLagMs: 5000 }), 'a node on time is not late at all')
})

t.test('a mark notes how long before it the last renewal was sent', async (t) => {
  const light = new LightNode('compaq-01', 8, context, '127.0.0.1', { ports: [ctl.port], count: () => undefined })
  t.teardown(() => light.stop())
  light.setMark()
  t.equal(light.renewalAgeAtMarkMs, null, 'no renewal before the first answer')
  const startedAt = sharedNow()
  light.start(0)
  await until('the first answer', () => light.firstAnswerAt !== null)
  await new Promise((resolve) => setTimeout(resolve, 300))
  const markedFrom = sharedNow()
  light.setMark()
  const age = light.renewalAgeAtMarkMs!
  t.ok(age >= 300, `renewed ${age.toFixed(0)} ms before the mark`)
  t.ok(age <= sharedNow() - startedAt, 'sent after the node started')
  t.ok(age >= markedFrom - light.firstAnswerAt!, 'sent before its answer came')
})
