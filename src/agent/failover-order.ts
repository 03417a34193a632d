/**
 * Which controller URL an attempt tries first, and when it stops (SPEC "Node agent": the next URL on a
 * connection error or a 503). One rule for the agent's ControllerClient and the fleet bench's light node,
 * which mirrors it: two copies of this state drifted apart once (the light node dropped a busy
 * controller's appointment when it failed over past it).
 *
 * - An attempt starts with the URL that answered last, and goes through the others in order.
 * - A busy notice ends the attempt, and the next starts with the controller that gave it: it is up and
 *   gave an appointment, while another URL is a replica that follows (a TLS handshake of its own, then
 *   503) or one as loaded; in a 10,000-node HA storm every deferral cost the follower that handshake, on
 *   the cores the leader needed. At most MAX_BUSY_ENDED_ATTEMPTS attempts in a row, though (below).
 * - An attempt that every URL failed makes the next start with the next URL.
 */

/**
 * How many attempts in a row a busy notice may end before the next one fails over past it as after a
 * connection error. The notice is plaintext, before TLS: whoever answers a URL's address (a hijacked
 * DNS name, an attacker on the path) can send it on every connection, and without a bound a node would
 * never try its other URLs. With it a forged notice delays the fail-over by two appointments, each
 * within the node's slack (cadence.ts); a real storm defers a node about once or twice.
 */
export const MAX_BUSY_ENDED_ATTEMPTS = 2

/** The order of one client's attempts over `count` URLs (see the module comment). */
export class FailoverOrder {
  private current = 0
  /** Attempts in a row that a busy notice ended. */
  private busyEnded = 0

  constructor(private readonly count: number) {
    if (!(Number.isInteger(count) && count >= 1)) throw new RangeError(`at least one URL is required, not ${count}`)
  }

  /** The URL the next attempt tries first (the last one that answered, or the next to try). */
  get first(): number {
    return this.current
  }

  /** The URLs of one attempt, in order. */
  attempt(): number[] {
    return Array.from({ length: this.count }, (_, k) => (this.current + k) % this.count)
  }

  /** `index` answered: the next attempt starts with it. */
  answered(index: number): void {
    this.current = index
    this.busyEnded = 0
  }

  /** `index` gave a busy notice: true when the attempt ends here (and the next starts with it). */
  busy(index: number): boolean {
    if (this.busyEnded >= MAX_BUSY_ENDED_ATTEMPTS) return false
    this.busyEnded += 1
    this.current = index
    return true
  }

  /** Every URL of the attempt failed: the next starts with the next URL. */
  exhausted(): void {
    this.busyEnded = 0
    this.current = (this.current + 1) % this.count
  }
}
