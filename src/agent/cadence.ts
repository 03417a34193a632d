/**
 * When the next check-in goes: every lease/3 with ±10 % jitter; after a failure, a retry timed by what
 * is at stake (SPEC "Node agent"; docs/limits.md "How the agent retries").
 *
 * The jitter is steered, given a clock: each node has a slot of its own in the lease/3 cycle (drawn at
 * random with its first answer) and each regular delay moves it back toward that slot, by at most the
 * ±10 %. Random jitter alone does not undo a storm: after a restart or take-over every node is answered
 * within seconds, and a busy controller answers the requests of a moment together (one durable write),
 * so the fleet kept checking in in waves of thousands a period apart (a drain request that arrived with
 * one waited behind 7,041 check-ins, 2.1 s). Steered, every node is back in its own slot within five
 * periods of a storm and the check-ins spread evenly over the cycle; no interval leaves lease/3 ± 10 %,
 * so the fail-safe's arithmetic is unchanged. Without a clock (or before the lease is known) it is
 * uniform random jitter as before.
 *
 * A controller restart or take-over makes every node of a fleet fail at once. Retrying on a fixed
 * backoff would bring them back all together, into a controller that can finish only so many
 * handshakes a second. So a retry is spread over the time the node can afford:
 * - a node that holds authority retries within its slack (until the last moment a check-in can still
 *   be answered before its fail-safe begins; once that has fired, before its lease ends, which keeps its
 *   range: retry-slack.ts), at a random point between a quarter and half of it: the
 *   node whose authority ends first comes back first, and each failure shrinks what is left, so the
 *   attempts still come before the fail-safe (which stays exact: it is an alarm of its own,
 *   plan-manager.ts); with no slack left, a few last attempts 0.25–0.75 s apart;
 * - a controller that said "busy, come back in X" (an admission deferral) is obeyed, at most 30 s (what a
 *   controller ever gives), unless the node's slack ends sooner: then at a random point of the second half
 *   of its slack less 1.5 s (BUSY_EXTRA_RESERVE_MS), or with none left, the last attempts;
 * - a node with nothing at stake (joining, or past its fail-safe with too little of its lease left:
 *   retry-slack.ts) backs off 0.5 s, 1 s, 2 s ... with wide jitter (±50 %), never above the regular delay.
 */

/** Before the first answer the lease is unknown: assume the SPEC's default, 30 s. */
const DEFAULT_LEASE_MS = 30_000
const FIRST_RETRY_MS = 500
/** The soonest retry: a failed attempt is never repeated in a tight loop. */
const MIN_RETRY_MS = 100
/** Slack below this is spent on quick last attempts (0.25–0.75 s apart) instead of being spread. */
const SLACK_FLOOR_MS = 250
/** The longest appointment kept: what a controller gives at most (server/admission.ts maxDeferMs). */
export const MAX_APPOINTMENT_MS = 30_000
/**
 * What a node keeps in reserve, on top of the agent's attempt reserve, when a busy controller's
 * appointment falls beyond its slack. Such a node comes back before its appointment, into a controller
 * that said it would still be saturated then: admitted ahead of newcomers, it waits in a queue of up to
 * 4 s (server/admission.ts returningBudgetMs), and an attempt there takes longer than the reserve
 * of a plain retry. In 10,000-node restarts every node whose fail-safe fired first had been deferred once
 * and came back at the end of its slack: its attempt began a median 3.9–4.1 s before its fail-safe and
 * took 4.4–5.4 s. With this reserve, side by side in one hour, fewer nodes were late in 5 of 6 pairs
 * (58, 43, 80, 658, 336, 820 against 716, 748, 341, 5,035, 635, 54; bench/RESULTS.md).
 */
const BUSY_EXTRA_RESERVE_MS = 1500

/** What a retry is timed by. */
export interface RetryContext {
  /**
   * Ms from now until the last moment a check-in can be sent and still be answered before the
   * fail-safe begins, or once it has, before the lease ends (retry-slack.ts); null while nothing is at
   * stake (no plan, or its lease ended).
   */
  readonly slackMs: number | null
  /** A busy controller's appointment (ms from now), or null. */
  readonly busyRetryAfterMs: number | null
}

const NO_CONTEXT: RetryContext = { slackMs: null, busyRetryAfterMs: null }

/** The most a regular delay moves a node toward its slot, and its jitter without a clock: the SPEC's ±10 % of lease/3. */
const STEER = 0.1

/** The longest regular delay between two check-ins (lease/3 + 10 %): a node in a steady state renews at least this often. */
export function longestRegularDelayMs(leaseMs: number): number {
  return (leaseMs / 3) * (1 + STEER)
}

/**
 * Tracks the lease in force and consecutive failures; `random` gives [0, 1), `now` (ms, monotonic)
 * lets the regular delay steer the node toward its slot (see the top of this file).
 */
export class CheckinCadence {
  private leaseMs: number | null = null
  private failures = 0
  /** A moment (on `now`'s clock) that is one of this node's slots; the others are lease/3 apart. */
  private slot: number | null = null

  constructor(
    private readonly random: () => number,
    private readonly now?: () => number,
  ) {}

  /** The lease (ms) the controller last announced, or null before the first answer. */
  get lease(): number | null {
    return this.leaseMs
  }

  /** Records the lease of an answer; a new lease draws the slot afresh (over the new cycle). */
  setLease(leaseMs: number): void {
    if (leaseMs !== this.leaseMs) this.slot = null
    this.leaseMs = leaseMs
  }

  /** The regular delay: lease/3 ±10 %, steered toward the node's slot when there is a clock; also clears the failure count. */
  next(): number {
    this.failures = 0
    if (this.now === undefined || this.leaseMs === null) return this.jittered()
    const period = this.leaseMs / 3
    const now = this.now()
    // The slot, drawn once: random 0.5 puts it exactly one period after this first answer.
    this.slot ??= now + (this.random() - 0.5) * period
    // How far past its nearest slot this node is, in [-period/2, period/2).
    const past = ((((now - this.slot) % period) + 1.5 * period) % period) - period / 2
    return Math.round(period - Math.max(-STEER * period, Math.min(STEER * period, past)))
  }

  /** The delay before the next attempt after a failure (see the top of this file). */
  retry(context: RetryContext = NO_CONTEXT): number {
    this.failures += 1
    const regular = this.jittered()
    const { slackMs } = context
    const holdsAuthority = slackMs !== null
    // Less slack than this is none worth spreading over: a few quick last attempts, not a tight loop.
    const slack = slackMs !== null && slackMs >= SLACK_FLOOR_MS ? slackMs : null
    if (context.busyRetryAfterMs !== null) {
      // Appointments are already spaced by the controller: a little jitter keeps equal ones apart. No
      // appointment is kept beyond what a controller ever gives, so a forged line cannot park a node.
      const appointment = Math.min(context.busyRetryAfterMs, MAX_APPOINTMENT_MS) * (1 + 0.1 * this.random())
      // Beyond the slack (less the busy reserve): at a random moment of its second half; with none left, the last attempts.
      const busySlack = slack !== null && slack - BUSY_EXTRA_RESERVE_MS >= SLACK_FLOOR_MS ? slack - BUSY_EXTRA_RESERVE_MS : null
      const latest = busySlack !== null ? busySlack * (0.5 + 0.5 * this.random()) : holdsAuthority ? this.lastAttempt() : Infinity
      return Math.round(Math.max(MIN_RETRY_MS, Math.min(appointment, latest)))
    }
    if (slack !== null) return Math.round(Math.max(MIN_RETRY_MS, Math.min(regular, slack * (0.25 + 0.25 * this.random()))))
    if (holdsAuthority) return Math.round(this.lastAttempt())
    const backoff = FIRST_RETRY_MS * 2 ** Math.min(this.failures - 1, 16) * (0.5 + this.random())
    return Math.round(Math.max(MIN_RETRY_MS, Math.min(regular, backoff)))
  }

  /** A last attempt with (almost) no slack left: 0.25–0.75 s from now, never a tight loop. */
  private lastAttempt(): number {
    return FIRST_RETRY_MS * (0.5 + this.random())
  }

  private jittered(): number {
    return Math.round(((this.leaseMs ?? DEFAULT_LEASE_MS) / 3) * (1 - STEER + 2 * STEER * this.random()))
  }
}
