/** When the next check-in goes: every lease/3 with ±10 % jitter, sooner after a failure (SPEC "Node agent"). */

/** Before the first answer the lease is unknown: assume the SPEC's default, 30 s. */
const DEFAULT_LEASE_MS = 30_000
const FIRST_RETRY_MS = 500

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

  /** After a failure: 0.5 s, 1 s, 2 s ... (failover already tried every URL), never above the regular delay. */
  retry(): number {
    this.failures += 1
    return Math.min(this.jittered(), Math.round(FIRST_RETRY_MS * 2 ** (this.failures - 1) * this.jitter()))
  }

  private jittered(): number {
    return Math.round(((this.leaseMs ?? DEFAULT_LEASE_MS) / 3) * this.jitter())
  }

  private jitter(): number {
    return 0.9 + 0.2 * this.random()
  }
}
