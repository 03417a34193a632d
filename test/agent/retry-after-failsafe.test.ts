// A node agent on a manual clock whose controller goes away (real TLS until then): once its fail-safe
// has fired it keeps trying within what is left of its lease (retry-slack.ts), so that a controller back
// in time finds it before its lease runs out and its range moves; it no longer backs off like a joining
// node, which after a dozen failures waits a whole check-in interval (lease/3).
import t from 'tap'
import { join } from 'node:path'
import { makePki } from '../e2e/harness.js'
import { testDir } from '../support/test-dir.js'
import { FakeClock } from './fake-clock.js'
import { Recorder, controllerIn, nodeIdentities, recordingAgent, until, urlOf } from './support.js'

const LEASE_MS = 30_000
const FAIL_SAFE_LEAD_MS = 10_000 // the defaults at lease 30 s: stop timeout 5 s + margin 5 s
const RESERVE_MS = 4500 // node-agent.ts attemptReserveMs(30 s)

/** The manual clock with a wall clock near the real one: the controller's plans expire in real time. */
class NearWallClock extends FakeClock {
  private readonly base = Date.now()
  override wallNow(): number {
    return this.base + this.now()
  }
}

const root = testDir(t)
const pki = await makePki(root)
const [id] = await nodeIdentities(pki, ['node-a'])

t.test('after the fail-safe the agent retries within the rest of its lease, and stops when too little is left', async (t) => {
  const ctl = await controllerIn(pki, join(root, 'c'), { total_shards: 8, max_concurrency: 8, lease_seconds: LEASE_MS / 1000, identify_interval_ms: 5000 })
  const clock = new NearWallClock()
  const attempts: number[] = []
  let failSafeAt: number | null = null
  const rec = new Recorder()
  const agent = recordingAgent(rec, id!, [urlOf(ctl.port)], {
    clock,
    onEvent: (event) => {
      if (event.type === 'checkin_failed') attempts.push(clock.now())
      if (event.type === 'authority_lost' && event.reason === 'lease_expiring') failSafeAt = clock.now()
    },
  })
  t.teardown(() => agent.stop())
  await agent.start()
  await until('the agent holds a plan', () => agent.status().state === 'active')
  const authorityEnd = agent.status().authorityEndsAt! - clock.wallNow() + clock.now()
  await ctl.running.stop()

  // Time moves only here: 100 ms steps, each followed by a real moment for the refused connections.
  while (clock.now() < authorityEnd + 5000) {
    await clock.advance(100)
    await new Promise((resolve) => setTimeout(resolve, 3))
  }
  t.equal(failSafeAt, authorityEnd - FAIL_SAFE_LEAD_MS, 'the fail-safe fired at its moment, as before')
  const afterFailSafe = attempts.filter((a) => a >= authorityEnd - FAIL_SAFE_LEAD_MS && a < authorityEnd - RESERVE_MS)
  t.comment(`attempts (ms before the end of authority): ${attempts.map((a) => authorityEnd - a).join(', ')}`)
  t.ok(afterFailSafe.length >= 3, `${afterFailSafe.length} attempts between the fail-safe and the lease's last ${RESERVE_MS} ms`)
  const lastStretch = attempts.filter((a) => a >= authorityEnd - RESERVE_MS && a < authorityEnd)
  t.ok(lastStretch.length <= 1, `no burst of last attempts once too little of the lease is left (${lastStretch.length})`)
  t.ok(clock.fired < 5000, `no tight loop (${clock.fired} timers fired)`)
})
