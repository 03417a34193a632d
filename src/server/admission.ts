/**
 * Admission of new connections under a reconnect storm (a restart, a take-over, a cold join). The
 * controller has one thread: when 10,000 nodes connect at once, the handshakes queue behind each other,
 * the clients' timeouts fire while their handshakes are still waiting, and the work done for a client
 * that has given up is wasted — then it retries and queues again. So a connection is admitted only
 * while the handshakes already admitted can be finished within `budgetMs`; the rest is deferred at
 * accept time, before any TLS work, with an appointment: "come back in X ms" (see busy-notice.ts).
 * An appointment comes after the queue in front and the appointments still outstanding, a handshake's
 * cost each, so the deferred clients come back at the rate the controller can serve them instead of all
 * at once, and a client that came back early and was admitted frees its place for the next deferral.
 *
 * Two guards keep this from becoming a way to lock nodes out:
 * - stalled handshakes cost no CPU: while the event loop has time to spare (utilization below
 *   `busyUtilization` over the last window) connections are admitted however many are in flight, so
 *   idle TCP connections from anywhere cannot make the controller refuse nodes for long — but only as
 *   many per `budgetMs` as the budget covers. A handshake admitted moments ago has not stalled, it has
 *   not started: after a restart 7,500 were admitted into an idle-looking loop while their clients were
 *   still writing their ClientHellos, then all arrived at once (one 14 s turn of the loop, every client
 *   timed out). So the connections admitted during the last `budgetMs` that the controller has not
 *   answered yet (no whole ClientHello: nothing written back) count as queued work whatever the load,
 *   and an attacker's idle or trickling connections count only while they are new. One whose
 *   ClientHello arrived has had it answered (the loop handles what it reads at once) and waits for its
 *   client: counting it too deferred nodes by the thousand in take-overs whose loop waited for work a
 *   third of the time, each deferral one more connection for a client already behind (endWindow's
 *   `unanswered`);
 * - a few connections are always admitted (`minInFlight`), so an estimate gone wrong cannot stop service.
 *
 * Appointments are kept per source address, and a client that holds one goes ahead of newcomers: it is
 * admitted while the queue is within `returningBudgetMs` (4 s: well inside a client's timeout, and what
 * the agent keeps for its last attempt, agent/node-agent.ts ATTEMPT_RESERVE_MS), newcomers only within
 * `budgetMs` (3 s). It comes back either at its appointment (a moment promised to it) or before it,
 * which the agent does only when its fail-safe is nearer than the appointment: the most urgent nodes get
 * the reserved end of the queue. Past `returningBudgetMs` it is told the same moment again and
 * takes no second slot: otherwise every early return pushed all later appointments out by one more
 * handshake, and in a 10,000-node restart with 9,500 deferrals the slots drifted ~20 s ahead of the
 * real queue (the controller stood idle while the last nodes waited out appointments, and their leases
 * ran out). One address holds one appointment, so a flood from one address cannot push the appointments
 * of others out; the book is bounded (`maxAppointments`, oldest dropped first).
 * Pure apart from the injected clock and load reading: tested with both.
 */

export interface AdmissionOptions {
  /** What the admitted handshakes may take to finish, in ms of the event loop (well below any client timeout). */
  readonly budgetMs: number
  /** The same for a client back with its appointment, who goes ahead of newcomers (below budgetMs it changes nothing). */
  readonly returningBudgetMs: number
  /** Per-connection cost assumed until one is measured (ms of event loop per finished handshake). */
  readonly initialCostMs: number
  /** Handshakes in flight that are always admitted. */
  readonly minInFlight: number
  /** Event-loop utilization (0..1) above which the loop counts as busy. */
  readonly busyUtilization: number
  /** The longest appointment handed out (ms). */
  readonly maxDeferMs: number
  /** The shortest appointment handed out (ms): a client never comes straight back. */
  readonly minDeferMs: number
  /** Monotonic ms. */
  readonly now: () => number
  /** Source addresses whose appointments are remembered at most (default 131,072). */
  readonly maxAppointments?: number
}

export const DEFAULT_ADMISSION: Omit<AdmissionOptions, 'now'> = {
  // A restart's or take-over's resumed connections come in a burst: 1,300-1,800 handshakes in flight in
  // the first seconds. The first to come are the nodes whose fail-safes are nearest (the agent sends
  // those first), and at 2 s (1,333 handshakes at 1.5 ms) admission deferred them by the thousand: the
  // nodes late were the ones deferred. At 3 s, five pairs side by side (10,000 nodes,
  // bench/RESULTS.md), three HA take-overs and two restarts left 0, 13, 0 and 0, 55 nodes late (deferred at
  // most 541), against 129, 3,569, 4 and 964, 1,498 at 2 s; a cold join's full handshakes, 3-6 ms each,
  // still queue for no more than 3 s.
  budgetMs: 3000,
  // As before the newcomers' budget was raised (twice 2 s): the agent's last attempt is sized for it.
  returningBudgetMs: 4000,
  // The storm that matters most comes right after a start: a restart or take-over, whose nodes resume
  // their sessions (~1-1.5 ms each, less once warm) with seconds of slack. Starting at a full
  // handshake's 3 ms, admission deferred 3,096-7,165 of them while its estimate came down, and 657-3,999
  // nodes were late; starting at 1.5 ms it deferred 190-1,684 and 8-104 were late (10,000 nodes, three
  // pairs side by side, bench/RESULTS.md). A cold join's full handshakes raise the estimate
  // within a few windows (its stable time did not suffer), and a queue admitted at half the real cost
  // still ends within 6 s (8 s for returning clients), inside a client's 10 s timeout.
  initialCostMs: 1.5,
  minInFlight: 64,
  busyUtilization: 0.75,
  // The agent keeps no appointment beyond 30 s (agent/cadence.ts MAX_APPOINTMENT_MS): a lease is 30 s by default.
  maxDeferMs: 30_000,
  minDeferMs: 250,
}

/** The decision for one new connection. */
export type AdmissionDecision = { readonly admit: true } | { readonly admit: false; readonly retryAfterMs: number }

const ADMIT: AdmissionDecision = { admit: true }
/** Weight of a new cost sample: a few windows follow a change of load, one odd window does not. */
const COST_WEIGHT = 0.3
/**
 * A window's sample counts as at most this many times the estimate, so one window raises the estimate by
 * at most COST_WEIGHT × (this − 1) = 30 %; a real rise still gets there, 30 % a window at first (from
 * 1 to 4.5 ms in 9 windows, about 2 s).
 */
const MAX_SAMPLE_RISE = 2
/** A window gives a cost sample only with this many finished handshakes (fewer say little about cost). */
const MIN_SAMPLE = 8

/** How long after its moment an appointment is still honoured (a client comes back a little late, jittered). */
const APPOINTMENT_GRACE_MS = 5000
const DEFAULT_MAX_APPOINTMENTS = 131_072

/** Decides admission from the handshakes in flight, the measured cost per connection and the loop's load. */
export class HandshakeAdmission {
  private costMs: number
  private utilization = 0
  /** Deferrals without an address (their appointments cannot be redeemed): numbered keys in the book. */
  private anonymous = 0
  private finishedInWindow = 0
  private deferredInWindow = 0
  private deferredCount = 0
  /**
   * Admissions in the current window, and in the windows before it that fall within budgetMs (newest
   * first) that were still unanswered at the last count (see endWindow).
   */
  private admittedNow = 0
  private admittedBefore: number[] = []
  /** Source address → the moment (opts.now) of its appointment, oldest first. */
  private readonly appointments = new Map<string, number>()
  /** Whether the replica served at the end of the last window (see endWindow). */
  private served = true

  constructor(private readonly opts: AdmissionOptions) {
    this.costMs = opts.initialCostMs
  }

  /**
   * Whether a new connection from `address` (the peer's IP address; omitted: no appointment is kept for
   * it) may start its handshake with `inFlight` others still in theirs.
   */
  decide(inFlight: number, address?: string): AdmissionDecision {
    const queueMs = inFlight * this.costMs
    if (inFlight < this.opts.minInFlight || queueMs <= this.opts.budgetMs) return this.admit(address)
    const now = this.opts.now()
    const booked = address === undefined ? undefined : this.appointments.get(address)
    const returning = booked !== undefined && booked >= now - APPOINTMENT_GRACE_MS
    if (returning && queueMs <= this.opts.returningBudgetMs) return this.admit(address)
    // Many in flight but the loop is idle: the older ones are stalled (a slow or hostile peer) and the ones
    // answered wait for their clients; the new ones still unanswered are queued.
    const recentMs = this.admittedRecently() * this.costMs
    if (this.utilization < this.opts.busyUtilization && recentMs < this.opts.budgetMs) return this.admit(address)
    this.deferredCount += 1
    this.deferredInWindow += 1
    // Back before its appointment and the queue is long: the same moment again, no second slot.
    if (booked !== undefined && booked > now + this.opts.minDeferMs) return { admit: false, retryAfterMs: Math.round(booked - now) }
    const queuedMs = this.utilization < this.opts.busyUtilization ? recentMs : queueMs
    // After the queue in front and the appointments still outstanding, a handshake each. Counted from the
    // book, not from a slot that only moves forward: a client that came back early and was admitted frees
    // its slot (in a 10,000-node restart a forward-only slot ran to ~14 s ahead, twice the slack the
    // nodes had left, so every node ignored its appointment and came back at the end of its slack).
    this.prune(now)
    const slot = Math.min(now + queuedMs + this.appointments.size * this.costMs, now + this.opts.maxDeferMs)
    const retryAfterMs = Math.max(this.opts.minDeferMs, Math.round(slot - now))
    this.book(address ?? `#${(this.anonymous += 1)}`, now + retryAfterMs)
    return { admit: false, retryAfterMs }
  }

  private admit(address: string | undefined): AdmissionDecision {
    this.admittedNow += 1
    if (address !== undefined && this.appointments.size > 0) this.appointments.delete(address)
    return ADMIT
  }

  /** Remembers `address`'s appointment at `at` (after prune()). */
  private book(address: string, at: number): void {
    // Re-inserted so that the Map's order stays roughly the order of the appointments (pruned from the front).
    this.appointments.delete(address)
    this.appointments.set(address, at)
  }

  /**
   * Drops appointments long past (their clients did not come back), oldest booked first, and the oldest
   * beyond the bound, leaving room for one more. Stops at the first one still good: one booked later
   * for an earlier moment stays a little longer, which errs on the side of later appointments.
   */
  private prune(now: number): void {
    const max = this.opts.maxAppointments ?? DEFAULT_MAX_APPOINTMENTS
    for (const [key, when] of this.appointments) {
      if (when >= now - APPOINTMENT_GRACE_MS && this.appointments.size < max) break
      this.appointments.delete(key)
    }
  }

  /** Source addresses holding an appointment (for tests). */
  get appointmentsKept(): number {
    return this.appointments.size
  }

  private admittedRecently(): number {
    let sum = this.admittedNow
    for (const n of this.admittedBefore) sum += n
    return sum
  }

  /** A handshake finished (either way): one more sample of the cost. */
  finished(): void {
    this.finishedInWindow += 1
  }

  /**
   * Ends a measuring window of `windowMs` during which the event loop was busy for `utilization`
   * (0..1) of the time, with `serving` telling whether the replica serves requests now (HA: leads with
   * its state loaded; a window not served throughout is no measurement, and the first one served
   * restarts the estimate, see startServing()), and `unanswered` the connections admitted during the
   * last `budgetMs` that have not been answered yet (counted by the caller at this moment; without it
   * every connection admitted during the last `budgetMs` is taken to be unanswered): the cost is the busy time per finished handshake (check-ins included, as they
   * are what a connection costs), taken from windows that are a measurement: busy enough, or ones in
   * which admission deferred connections. The second matters: admission caps the rate at one handshake
   * per estimated cost, so an estimate above the real cost holds the loop below `busyUtilization`, and
   * if only busy windows counted it could never come down. In a 10,000-node restart the estimate of 3 ms
   * against a real ~1.5 ms kept the loop two-thirds idle while 14,000 connections were deferred and
   * every node was late. (Deferring because of idle stalled connections only lowers the estimate, which
   * busy windows correct if it goes too low.)
   *
   * A sample is capped at MAX_SAMPLE_RISE times the estimate. A window in which the loop was busy
   * while few handshakes finished (a long collection, a journal compaction) gives a sample many times the
   * cost: 8 handshakes in a fully busy window say 31 ms. In two 10,000-node restarts that went wrong
   * (admission's state sampled every 0.5 s), one such window lifted the estimate from 0.74 to 6.77 ms and
   * from 1.16 to 9.15 ms at once. For the seconds it took to come down, admission deferred nearly every
   * connection while the loop sat idle at times, and its appointments, one estimated cost apart, went up
   * to ~15 s out: hundreds of nodes (634 in one) waited idle for them, 593 and 2,239 nodes were late,
   * and every node renewed only 32.6 and 39.5 s after the kill instead of the usual 16 s. (The cost as
   * one ratio over the last 2 s, tried side by side in three restarts each, did worse: nodes late 1,829,
   * 789, 147 against 1, 557, 24; bench/RESULTS.md.)
   */
  endWindow(windowMs: number, utilization: number, serving = true, unanswered?: number): void {
    // A window is a measurement only if the replica served from its start to its end: the one in which
    // it began to serve holds the state load (a busy loop, a few cheap 503 answers) as well.
    const servedThroughout = serving && this.served
    if (serving && !this.served) this.startServing()
    this.served = serving
    this.utilization = utilization
    // A loop too busy to end its windows keeps counting admissions in the current one: it errs on the safe side.
    if (unanswered === undefined) {
      this.admittedBefore.unshift(this.admittedNow)
      this.admittedBefore.length = Math.min(this.admittedBefore.length, Math.max(0, Math.ceil(this.opts.budgetMs / windowMs) - 1))
    } else {
      this.admittedBefore = [Math.max(0, Math.floor(unanswered))]
    }
    this.admittedNow = 0
    const measured = servedThroughout && (utilization >= this.opts.busyUtilization || this.deferredInWindow > 0)
    if (this.finishedInWindow >= MIN_SAMPLE && measured) {
      const sample = Math.min((utilization * windowMs) / this.finishedInWindow, MAX_SAMPLE_RISE * this.costMs)
      this.costMs += COST_WEIGHT * (sample - this.costMs)
    }
    this.finishedInWindow = 0
    this.deferredInWindow = 0
  }

  /**
   * The replica has begun to serve (HA: it leads, with its state loaded; endWindow notices). What it
   * measured before is no cost of serving: a follower answers `not_leader`, a replica loading the state
   * `unavailable`, on a loop busy with something else (the load itself: windows with a few cheap answers
   * and seconds of busy loop read as 5 ms a connection). So the estimate starts again from
   * `initialCostMs`, as after a restart. The appointments already handed out stay booked: their clients
   * hold them (often the most urgent nodes, back first after the kill), and new ones are spaced by the
   * new estimate. Measured in a 10,000-node take-over whose follower had been hit during a slow cold
   * join: its estimate stood at 5.3 ms at the kill, the new leader deferred 10,931 connections in its
   * first 23 s with appointments up to ~30 s out, renewed 1,723 nodes by then, and 27,388 shards moved.
   */
  private startServing(): void {
    this.costMs = this.opts.initialCostMs
  }

  /** The event loop's utilization (0..1) over the last window ended (endWindow). */
  get loopUtilization(): number {
    return this.utilization
  }

  /** How long the admitted handshakes may take to finish (ms of the event loop). */
  get budgetMs(): number {
    return this.opts.budgetMs
  }

  /** The cost per connection in use (ms). */
  get estimatedCostMs(): number {
    return this.costMs
  }

  /** Connections deferred so far. */
  get deferred(): number {
    return this.deferredCount
  }
}
