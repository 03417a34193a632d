/**
 * When the next check-in goes: every lease/3 with ±10 % jitter; after a failure, a retry timed by what
 * is at stake (SPEC "Node agent", README "Reconnecting").
 *
 * A controller restart or take-over makes every node of a fleet fail at once. Retrying on a fixed
 * backoff would bring them back all together, into a controller that can finish only so many
 * handshakes a second. So a retry is spread over the time the node can afford:
 * - a node that holds authority retries within its slack (until the last moment a check-in can still
 *   be answered before its fail-safe begins), at a random point of the first half of it: the node whose
 *   authority ends first comes back first, and each failure halves what is left, so the last attempts
 *   still come before the fail-safe (which stays exact: it is an alarm of its own, plan-manager.ts);
 * - a controller that said "busy, come back in X" (an admission deferral) is obeyed, unless the node's
 *   slack ends sooner;
 * - a node without authority (joining, or after its fail-safe) backs off 0.5 s, 1 s, 2 s ... with wide
 *   jitter, never above the regular delay.
 */

/** Before the first answer the lease is unknown: assume the SPEC's default, 30 s. */
const DEFAULT_LEASE_MS = 30_000
const FIRST_RETRY_MS = 500
/** The soonest retry: a failed attempt is never repeated in a tight loop. */
const MIN_RETRY_MS = 100

/** What a retry is timed by. */
export interface RetryContext {
  /**
   * Ms from now until the last moment a check-in can be sent and still be answered before the
   * fail-safe begins; null while the node holds no authority.
   */
  readonly slackMs: number | null
  /** A busy controller's appointment (ms from now), or null. */
  readonly busyRetryAfterMs: number | null
}

const NO_CONTEXT: RetryContext = { slackMs: null, busyRetryAfterMs: null }

/** Tracks the lease in force and consecutive failures; `random` gives [0, 1). */
export class CheckinCadence {
  private leaseMs: number | null = null
  private failures = 0

  constructor(private readonly random: () => number) {}

  /** The lease (ms) the controller last announced, or null before the first answer. */
  get lease(): number | null {
    return this.leaseMs
  }

  /** Records the lease of an answer. */
  setLease(leaseMs: number): void {
    this.leaseMs = leaseMs
  }

  /** The regular delay: lease/3 ±10 %; also clears the failure count. */
  next(): number {
    this.failures = 0
    return this.jittered()
  }

  /** The delay before the next attempt after a failure (see the top of this file). */
  retry(context: RetryContext = NO_CONTEXT): number {
    this.failures += 1
    const { slackMs, busyRetryAfterMs } = context
    const regular = this.jittered()
    if (busyRetryAfterMs !== null) {
      // Appointments are already spaced by the controller: a little jitter keeps equal ones apart.
      const appointment = busyRetryAfterMs * (1 + 0.1 * this.random())
      const latest = slackMs === null ? Infinity : Math.max(MIN_RETRY_MS, slackMs * (0.5 + 0.5 * this.random()))
      return Math.round(Math.max(MIN_RETRY_MS, Math.min(appointment, latest)))
    }
    if (slackMs !== null) return Math.round(Math.max(MIN_RETRY_MS, Math.min(regular, slackMs * (0.25 + 0.25 * this.random()))))
    const backoff = FIRST_RETRY_MS * 2 ** Math.min(this.failures - 1, 16) * (0.5 + this.random())
    return Math.round(Math.max(MIN_RETRY_MS, Math.min(regular, backoff)))
  }

  private jittered(): number {
    return Math.round(((this.leaseMs ?? DEFAULT_LEASE_MS) / 3) * (0.9 + 0.2 * this.random()))
  }
}
