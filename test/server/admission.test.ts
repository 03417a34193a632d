// Admission under a reconnect storm (src/server/admission.ts) and the busy notice's wire form.
import t from 'tap'
import { DEFAULT_ADMISSION, HandshakeAdmission, type AdmissionDecision } from '../../src/server/admission.js'
import { MAX_APPOINTMENT_MS } from '../../src/agent/cadence.js'
import { busyNotice, looksLikeBusyNotice, parseBusyNotice } from '../../src/net/busy-notice.js'

/** How many of `n` new connections are admitted one after another, with `inFlight` handshakes in flight. */
function admittedOf(a: HandshakeAdmission, n = 1000, inFlight = 10_000): number {
  let admitted = 0
  for (let i = 0; i < n; i++) if (a.decide(inFlight).admit) admitted += 1
  return admitted
}

function admission(overrides: Partial<typeof DEFAULT_ADMISSION> = {}) {
  let now = 1000
  // A test that sets its own budget reserves returners twice as much unless it says otherwise.
  const returning = overrides.budgetMs === undefined ? {} : { returningBudgetMs: 2 * overrides.budgetMs }
  const a = new HandshakeAdmission({ ...DEFAULT_ADMISSION, ...returning, ...overrides, now: () => now })
  return { a, advance: (ms: number) => (now += ms) }
}

t.test('admits while the handshakes in flight fit the budget; a few always', async (t) => {
  const { a } = admission({ budgetMs: 300, initialCostMs: 3, minInFlight: 64 })
  a.endWindow(250, 1) // the loop is saturated
  t.same(a.decide(0), { admit: true })
  t.same(a.decide(100), { admit: true }, '100 × 3 ms = 300 ms fits')
  t.equal(a.decide(101).admit, false, '303 ms does not')
  const few = admission({ budgetMs: 0, minInFlight: 64 })
  few.a.endWindow(250, 1)
  t.same(few.a.decide(63), { admit: true }, 'under minInFlight: admitted whatever the estimate says')
})

t.test('stalled handshakes cost nothing: an idle loop admits however many are in flight', async (t) => {
  const { a } = admission({ budgetMs: 300, minInFlight: 1 })
  a.endWindow(250, 0.05)
  t.same(a.decide(10_000), { admit: true }, '10,000 idle TCP connections cannot lock a node out')
  a.endWindow(250, 0.95)
  t.equal(a.decide(10_000).admit, false, 'the same number while the loop is saturated is a queue')
})

t.test('an idle loop admits only as many new handshakes per budget as the budget covers: new ones have not stalled yet', async (t) => {
  const { a } = admission({ budgetMs: 300, initialCostMs: 3, minInFlight: 1 })
  a.endWindow(250, 0.05)
  t.equal(admittedOf(a), 100, '100 × 3 ms fill the 300 ms budget; the rest of a burst into an idle-looking loop is deferred')
  const deferred = a.decide(10_000)
  t.equal(deferred.admit, false)
  t.ok(!deferred.admit && deferred.retryAfterMs >= 300, 'the appointment comes after the new work in front of it')
  a.endWindow(250, 0.05)
  t.equal(a.decide(10_000).admit, false, 'one window later those 100 are still new (budget 300 ms > window 250 ms)')
  a.endWindow(250, 0.05)
  t.same(a.decide(10_000), { admit: true }, 'once they are older than the budget they count as stalled, not queued')
  const busyLoop = admission({ budgetMs: 300, initialCostMs: 3, minInFlight: 1 })
  busyLoop.a.endWindow(250, 0.05)
  for (let i = 0; i < 100; i++) busyLoop.a.decide(10_000)
  t.same(busyLoop.a.decide(50), { admit: true }, 'few in flight: admitted whatever was admitted before')
})

t.test('with the unanswered ones counted: new connections not yet answered are queued work, answered ones wait for their clients', async (t) => {
  const { a } = admission({ budgetMs: 300, initialCostMs: 3, minInFlight: 1 })
  a.endWindow(250, 0.05, true, 0)
  t.equal(admittedOf(a), 100, 'admitted since the count are taken to be unanswered: a burst into an idle-looking loop still stops at the budget')
  a.endWindow(250, 0.05, true, 100)
  t.equal(a.decide(10_000).admit, false, 'all 100 still unanswered at the next count: still queued')
  a.endWindow(250, 0.05, true, 40)
  t.equal(admittedOf(a), 60, '60 of them sent their ClientHello and were answered: 60 places free while the loop is idle')
  a.endWindow(250, 0.95, true, 0)
  t.equal(a.decide(10_000).admit, false, 'none unanswered, but a saturated loop: the handshakes in flight are a queue')
  const deferred = admission({ budgetMs: 300, initialCostMs: 3, minInFlight: 1 })
  deferred.a.endWindow(250, 0.05, true, 100)
  const decision = deferred.a.decide(10_000)
  t.equal(decision.admit, false, '100 unanswered fill the budget')
  t.ok(!decision.admit && decision.retryAfterMs >= 300, `the appointment comes after the unanswered ones in front (${decision.admit ? '' : decision.retryAfterMs} ms)`)
})

t.test('appointments: after the queue drains, one handshake apart, bounded', async (t) => {
  const { a, advance } = admission({ budgetMs: 300, initialCostMs: 3, minInFlight: 1, maxDeferMs: 1000, minDeferMs: 250 })
  a.endWindow(250, 1)
  const first = a.decide(200) // 600 ms of queue in front
  const second = a.decide(200)
  t.same(first, { admit: false, retryAfterMs: 600 })
  t.same(second, { admit: false, retryAfterMs: 603 }, 'the next one 3 ms later, not at the same moment')
  for (let i = 0; i < 1000; i++) a.decide(200)
  t.same(a.decide(200), { admit: false, retryAfterMs: 1000 }, 'never beyond maxDeferMs')
  t.equal(DEFAULT_ADMISSION.maxDeferMs, MAX_APPOINTMENT_MS, 'no longer than the agent keeps an appointment')
  advance(60_000)
  t.same(a.decide(200), { admit: false, retryAfterMs: 600 }, 'after the storm the schedule starts over from the queue')
  t.equal(a.deferred, 1004)
  const short = admission({ budgetMs: 1, initialCostMs: 1, minInFlight: 1, minDeferMs: 250 })
  short.a.endWindow(250, 1)
  t.same(short.a.decide(2), { admit: false, retryAfterMs: 250 }, 'never sooner than minDeferMs')
})

t.test('the cost follows busy windows with enough handshakes, and windows that deferred, and ignores the others', async (t) => {
  const { a } = admission({ initialCostMs: 3 })
  for (let i = 0; i < 50; i++) a.finished()
  a.endWindow(250, 1) // 250 ms for 50 handshakes: 5 ms each
  t.equal(a.estimatedCostMs, 3 + 0.3 * (5 - 3))
  for (let i = 0; i < 3; i++) a.finished()
  a.endWindow(250, 1)
  t.equal(a.estimatedCostMs, 3.6, 'three handshakes say little: no sample')
  for (let i = 0; i < 50; i++) a.finished()
  a.endWindow(250, 0.2)
  t.equal(a.estimatedCostMs, 3.6, 'an idle window is no measurement of the cost')
  for (let k = 0; k < 30; k++) {
    for (let i = 0; i < 250; i++) a.finished()
    a.endWindow(250, 1)
  }
  t.ok(Math.abs(a.estimatedCostMs - 1) < 0.01, `converges to 1 ms: ${a.estimatedCostMs}`)
})

t.test('one odd window raises the estimate by at most 30 %; a real rise still gets there', async (t) => {
  // A restart that went wrong: one fully busy window (a long collection) in which 12 handshakes finished
  // took the estimate from 0.74 to 6.77 ms at once, and admission deferred nearly everyone for seconds.
  const { a } = admission({ initialCostMs: 1 })
  for (let i = 0; i < 12; i++) a.finished()
  a.endWindow(250, 1) // 250 ms for 12 handshakes: a sample of 20.8 ms
  t.equal(a.estimatedCostMs, 1.3, 'capped at twice the estimate, weighted 0.3: +30 %')
  for (let k = 0; k < 10; k++) {
    for (let i = 0; i < 200; i++) a.finished()
    a.endWindow(250, 0.8) // back to 1 ms a handshake
  }
  t.ok(Math.abs(a.estimatedCostMs - 1) < 0.01, `and back: ${a.estimatedCostMs.toFixed(3)} ms`)
  // The cost really rises fivefold (full handshakes instead of resumed ones, say): 50 a window at 5 ms.
  let windows = 0
  while (a.estimatedCostMs < 4.5 && windows < 100) {
    for (let i = 0; i < 50; i++) a.finished()
    a.endWindow(250, 1)
    windows += 1
  }
  t.ok(windows <= 10, `followed within ${windows} windows of 250 ms`)
  for (let k = 0; k < 20; k++) {
    for (let i = 0; i < 50; i++) a.finished()
    a.endWindow(250, 1)
  }
  t.ok(Math.abs(a.estimatedCostMs - 5) < 0.01, `settles at the real cost: ${a.estimatedCostMs.toFixed(3)} ms`)
})

t.test('an estimate above the real cost comes down although the cap it sets keeps the loop below busy', async (t) => {
  // A restart: the estimate says 3 ms, a resumed connection really costs 1.5 ms. The cap (2000 ms of
  // admissions per 2 s) then admits 667 per 2 s, which keep the loop only half busy.
  const { a, advance } = admission({ initialCostMs: 3, budgetMs: 2000, minInFlight: 1 })
  let deferred = 0
  for (let w = 0; w < 40; w++) {
    // 2,000 clients waiting in their handshakes (slow to finish theirs) and 200 new ones per window.
    for (let i = 0; i < 200; i++) if (!a.decide(2000, `127.1.${w}.${i}`).admit) deferred += 1
    const finished = Math.min(200, Math.floor(2000 / 8 / a.estimatedCostMs)) // what the cap let through
    for (let i = 0; i < finished; i++) a.finished()
    advance(250)
    a.endWindow(250, Math.min(1, (finished * 1.5) / 250))
  }
  t.ok(deferred > 0, 'the cap deferred connections')
  t.ok(Math.abs(a.estimatedCostMs - 1.5) < 0.1, `the estimate found the real cost: ${a.estimatedCostMs.toFixed(2)} ms`)
  for (let i = 0; i < 50; i++) a.finished()
  a.endWindow(250, 0.1)
  t.ok(Math.abs(a.estimatedCostMs - 1.5) < 0.1, 'a quiet window without deferrals still measures nothing')
})

t.test('a replica measures its cost only while it serves, and starts from the initial estimate when it begins to', async (t) => {
  const { a } = admission({ budgetMs: 300, initialCostMs: 1.5, minInFlight: 1 })
  const window = (finished: number, serving: boolean) => {
    for (let i = 0; i < finished; i++) a.finished()
    a.endWindow(250, 1, serving)
  }
  window(8, true)
  t.ok(a.estimatedCostMs > 1.5, 'a busy window with 8 handshakes, served throughout, is a measurement (the control)')
  const raised = a.estimatedCostMs
  window(8, false) // a leader stepped down: a follower answers not_leader
  t.equal(a.estimatedCostMs, raised, 'a window not served is no measurement')
  window(8, false) // ... and one that leads again loads the state
  t.equal(a.estimatedCostMs, raised)
  const deferred = a.decide(10_000, '10.0.0.1')
  t.equal(deferred.admit, false)
  window(8, true) // it serves again at the end of this window
  t.equal(a.estimatedCostMs, 1.5, `back at the initial estimate (was ${raised.toFixed(2)} ms); the window it began to serve in is no measurement either`)
  t.equal(a.appointmentsKept, 1, 'the appointment handed out before stays booked: its client holds it')
  window(8, true)
  t.ok(a.estimatedCostMs > 1.5, 'from the next window on, measured again')
  const standalone = admission({ initialCostMs: 1.5 })
  for (let i = 0; i < 8; i++) standalone.a.finished()
  standalone.a.endWindow(250, 1)
  t.ok(standalone.a.estimatedCostMs > 1.5, 'a controller that always serves (no `serving` given) measures from its first window')
})

t.test('the busy notice: one plaintext line no TLS client takes for TLS', async (t) => {
  const line = busyNotice(1234)
  t.equal(line.toString('latin1'), 'PXE-BUSY retry_after_ms=1234\r\n')
  t.ok(looksLikeBusyNotice(line))
  t.notOk(looksLikeBusyNotice(Buffer.from([0x16, 0x03, 0x03])), 'a TLS handshake record is not one')
  t.equal(parseBusyNotice(line), 1234)
  t.equal(parseBusyNotice(busyNotice(-5)), 0)
  t.equal(parseBusyNotice(busyNotice(1e12)), 999_999_999)
  for (const bad of ['PXE-BUSY retry_after_ms=\r\n', 'PXE-BUSY retry_after_ms=12', 'PXE-BUSY retry_after_ms=1234567890\r\n', 'PXE-BUSY retry_after_ms=-1\r\n', 'PXE-IDLE\r\n']) {
    t.equal(parseBusyNotice(Buffer.from(bad, 'latin1')), null, JSON.stringify(bad))
  }
})

t.test('appointments are kept per address: back early into a long queue, the same moment and no second slot', async (t) => {
  const { a, advance } = admission({ budgetMs: 300, initialCostMs: 3, minInFlight: 1, maxDeferMs: 30_000, minDeferMs: 250 })
  a.endWindow(250, 1)
  t.same(a.decide(250, '10.0.0.1'), { admit: false, retryAfterMs: 750 })
  for (let i = 0; i < 50; i++) t.same(a.decide(250, '10.0.0.1'), { admit: false, retryAfterMs: 750 }, 'back at once, 750 ms of queue (over twice the budget): the same moment')
  t.same(a.decide(250, '10.0.0.2'), { admit: false, retryAfterMs: 753 }, 'another address: the next slot, one handshake after the first, however often 10.0.0.1 came back')
  t.equal(a.appointmentsKept, 2)
  advance(100)
  t.same(a.decide(250, '10.0.0.1'), { admit: false, retryAfterMs: 650 }, 'back 100 ms later: the same moment, 650 ms from now')
  // Without the address every deferral takes a slot (the drift the book prevents).
  const anonymous = admission({ budgetMs: 300, initialCostMs: 3, minInFlight: 1, maxDeferMs: 30_000, minDeferMs: 250 })
  anonymous.a.endWindow(250, 1)
  for (let i = 0; i < 52; i++) anonymous.a.decide(250)
  t.same(anonymous.a.decide(250), { admit: false, retryAfterMs: 906 })
})

t.test('appointments count the ones still outstanding: a client admitted before its appointment frees its slot', async (t) => {
  const { a, advance } = admission({ budgetMs: 300, initialCostMs: 3, minInFlight: 1, maxDeferMs: 30_000, minDeferMs: 250 })
  a.endWindow(250, 1)
  t.same(a.decide(200, '10.0.0.1'), { admit: false, retryAfterMs: 600 }, '600 ms of queue in front')
  t.same(a.decide(200, '10.0.0.2'), { admit: false, retryAfterMs: 603 }, 'after the queue and the one appointment before it')
  t.same(a.decide(150, '10.0.0.1'), { admit: true }, 'the first is back early (its fail-safe is near), within twice the budget: admitted')
  t.same(a.decide(200, '10.0.0.3'), { admit: false, retryAfterMs: 603 }, 'its slot is free again: one appointment outstanding, not two')
  advance(60_000)
  t.same(a.decide(200, '10.0.0.4'), { admit: false, retryAfterMs: 600 }, 'appointments long past no longer count')
  t.equal(a.appointmentsKept, 1)
})

t.test('a client back before its appointment (its fail-safe is near) goes ahead of newcomers within twice the budget', async (t) => {
  const { a, advance } = admission({ budgetMs: 300, initialCostMs: 3, minInFlight: 1, maxDeferMs: 30_000, minDeferMs: 250 })
  a.endWindow(250, 1)
  t.same(a.decide(150, '10.0.0.1'), { admit: false, retryAfterMs: 450 })
  advance(50)
  t.equal(a.decide(150, '10.0.0.9').admit, false, 'a newcomer with 450 ms of queue in front is deferred')
  t.same(a.decide(150, '10.0.0.1'), { admit: true }, 'the returning client, 400 ms before its appointment, is admitted')
})

t.test('a client at its appointment goes ahead of newcomers while the queue is within twice the budget', async (t) => {
  const { a, advance } = admission({ budgetMs: 300, initialCostMs: 3, minInFlight: 1, maxDeferMs: 30_000, minDeferMs: 250 })
  a.endWindow(250, 1)
  const first = a.decide(200, '10.0.0.1')
  t.equal(first.admit, false)
  advance(600)
  t.equal(a.decide(150, '10.0.0.9').admit, false, 'a newcomer with 450 ms of queue in front is deferred')
  t.same(a.decide(150, '10.0.0.1'), { admit: true }, 'the client whose appointment is now is admitted')
  t.equal(a.appointmentsKept, 1, 'its appointment is used up; the newcomer holds one')
  t.equal(a.decide(150, '10.0.0.1').admit, false, 'its next connection is an ordinary one again')
  const late = admission({ budgetMs: 300, initialCostMs: 3, minInFlight: 1, maxDeferMs: 30_000, minDeferMs: 250 })
  late.a.endWindow(250, 1)
  late.a.decide(200, '10.0.0.1')
  late.advance(600)
  t.equal(late.a.decide(201, '10.0.0.1').admit, false, 'not beyond twice the budget (603 ms of queue)')
  late.advance(60_000)
  t.equal(late.a.decide(150, '10.0.0.3').admit, false)
  t.equal(late.a.decide(150, '10.0.0.1').admit, false, 'an appointment long past is forgotten: no priority')
})

t.test('the appointment book is bounded, oldest dropped first', async (t) => {
  const { a } = admission({ budgetMs: 300, initialCostMs: 3, minInFlight: 1, maxDeferMs: 30_000, maxAppointments: 100 })
  a.endWindow(250, 1)
  let last: AdmissionDecision = { admit: true }
  for (let i = 0; i < 10_000; i++) last = a.decide(200, `10.0.${i >> 8}.${i & 255}`)
  t.equal(a.appointmentsKept, 100, '10,000 addresses, 100 kept')
  t.same(last, { admit: false, retryAfterMs: 600 + 99 * 3 }, 'an appointment counts the queue and the 99 others kept, a handshake each')
  const again = a.decide(250, '10.0.39.15') // the last one booked, back into a queue over twice the budget
  t.same(again, last, 'the newest are kept (the same moment again)')
})

t.test("a fresh controller's defaults: a burst of resumptions is admitted at a resumed connection's cost, not a full handshake's", async (t) => {
  // Right after a restart or take-over (nodes resuming, seconds of slack), the first windows run on the
  // initial estimate: at 3 ms a burst into the idle new process was cut at 667 per 2 s and thousands of
  // nodes deferred past their fail-safe; at 1.5 ms, 1,334 (bench/RESULTS.md).
  const { a } = admission({ minInFlight: 1 })
  let admitted = 0
  for (let i = 0; i < 5000; i++) if (a.decide(i).admit) admitted += 1
  t.equal(admitted, Math.floor(DEFAULT_ADMISSION.budgetMs / 1.5) + 1, 'the 3 s budget at 1.5 ms a connection, before any measurement')
  t.equal(a.estimatedCostMs, 1.5)
})

t.test("a fresh controller's defaults: newcomers queue for 3 s, a client back with its appointment for 4 s", async (t) => {
  const { a, advance } = admission({ minInFlight: 1 })
  a.endWindow(250, 1) // saturated: no idle-loop admissions
  t.equal(DEFAULT_ADMISSION.budgetMs, 3000)
  t.equal(DEFAULT_ADMISSION.returningBudgetMs, 4000)
  t.same(a.decide(2000, '10.0.0.1'), { admit: true }, '2,000 handshakes at 1.5 ms: 3 s, within a newcomer\'s budget')
  const deferred = a.decide(2001, '10.0.0.1')
  t.equal(deferred.admit, false, 'one more is past it')
  advance(deferred.admit ? 0 : deferred.retryAfterMs)
  t.same(a.decide(2600, '10.0.0.1'), { admit: true }, 'back at its appointment into 3.9 s: ahead of newcomers')
  t.equal(a.decide(2600, '10.0.0.2').admit, false, 'a newcomer into the same queue is deferred')
  const back = a.decide(2700, '10.0.0.2')
  t.equal(back.admit, false, 'past 4 s even a returning client waits')
})

t.test("the loop's utilization it decides by is the last window's (the pxe_event_loop_utilization_ratio gauge)", async (t) => {
  const { a } = admission()
  t.equal(a.loopUtilization, 0, 'before the first window ends')
  a.endWindow(250, 0.6)
  t.equal(a.loopUtilization, 0.6)
  a.endWindow(250, 0.15, false)
  t.equal(a.loopUtilization, 0.15, 'read while the replica does not serve, too')
})
