/**
 * One etcd lease held by a replica, kept alive by us (not by the client library) so that we know when
 * the last renewal that etcd accepted was SENT. etcd expires the lease no earlier than TTL after it
 * received that renewal, hence no earlier than TTL after we sent it; the session ends itself once no
 * renewal succeeded for the renew deadline (2/3 TTL), leaving a third of the TTL before anyone else
 * could be elected. Time is monotonic (performance.now): a process frozen past its deadline sees it
 * passed on the first check after waking, before it acts.
 */
import { performance } from 'node:perf_hooks'
import { EtcdClientError, type EtcdClient } from './etcd-api.js'
import type { KeptLease, LeaseKeeper } from './lease-keeper.js'

/** The renewal timing of one lease TTL (client-go's LeaseDuration / RenewDeadline / RetryPeriod). */
export interface LeaseTiming {
  readonly ttlSeconds: number
  /** No successful renewal SENT within this long: the session is over (2/3 TTL). */
  readonly renewDeadlineMs: number
  /** Pause after a successful renewal (TTL/6: several tries fit in the deadline). */
  readonly renewIntervalMs: number
  /** Longest wait for one renewal (TTL/6, and never past the deadline): a hung member costs one try. */
  readonly attemptTimeoutMs: number
  /** Pause after a failed renewal or campaign step. */
  readonly retryDelayMs: number
}

/** The timing for a lease of `ttlSeconds`. */
export function leaseTiming(ttlSeconds: number): LeaseTiming {
  const ttlMs = ttlSeconds * 1000
  return {
    ttlSeconds,
    renewDeadlineMs: Math.floor((ttlMs * 2) / 3),
    renewIntervalMs: Math.floor(ttlMs / 6),
    attemptTimeoutMs: Math.floor(ttlMs / 6),
    retryDelayMs: Math.max(50, Math.floor(ttlMs / 20)),
  }
}

/** Why a session ended. */
export type SessionEndReason = 'renew_deadline' | 'lease_gone' | 'key_lost' | 'fence_refused' | 'resigned' | 'closed'

/** Hooks of a session; `onEnd` runs synchronously, exactly once. */
export interface SessionHooks {
  onEnd(reason: SessionEndReason): void
  onRenewed?(): void
  onRenewError?(err: Error): void
}

/** A monotonic clock in milliseconds. */
export type MonotonicClock = () => number

/** Revokes a lease; true when it is gone (revoked now or already), false when etcd could not be asked. */
export async function revokeLease(client: EtcdClient, leaseId: string, timeoutMs: number): Promise<boolean> {
  try {
    await client.revokeLease(leaseId, timeoutMs)
    return true
  } catch (err) {
    return err instanceof EtcdClientError && err.kind === 'lease_not_found'
  }
}

/** A granted lease and the loop that renews it until the session ends. */
export class LeaseSession {
  private lastRenewSentAt = 0
  private endReason: SessionEndReason | null = null
  private deadlineTimer: NodeJS.Timeout | undefined
  private wakeLoop: (() => void) | null = null
  private revoking: Promise<boolean> | undefined
  /** Renewed by a LeaseKeeper's thread instead of this loop (see lease-keeper.ts) once it runs, or null. */
  private kept: KeptLease | null = null

  private constructor(
    private readonly client: EtcdClient,
    readonly leaseId: string,
    private readonly timing: LeaseTiming,
    private readonly now: MonotonicClock,
    private readonly hooks: SessionHooks,
    grantSentAt: number,
    keeper: LeaseKeeper | undefined,
  ) {
    this.lastRenewSentAt = grantSentAt
    this.armDeadline()
    // This thread renews until the keeper's thread runs with its client, then hands the lease over. A
    // campaign never waits for the thread: under load its start-up (loading the etcd client, reading its
    // PEM files) took over a second, and a standby that has not put its election key cannot take over.
    if (keeper === undefined) void this.renewLoop()
    else if (keeper.isReady()) this.handOver(keeper)
    else {
      void this.renewLoop()
      keeper
        .ready()
        .then(() => this.handOver(keeper))
        .catch((err: unknown) => this.hooks.onRenewError?.(err as Error)) // it stays with this thread
    }
  }

  /**
   * Grants a lease of `timing.ttlSeconds` and starts renewing it: on this thread, or with `keeper` on the
   * keeper's once it runs (then `now` must be the real monotonic clock, performance.now, as the keeper's
   * stamps are).
   */
  static async open(client: EtcdClient, timing: LeaseTiming, hooks: SessionHooks, now: MonotonicClock = () => performance.now(), keeper?: LeaseKeeper): Promise<LeaseSession> {
    const sentAt = now()
    const lease = await client.grantLease(timing.ttlSeconds, timing.attemptTimeoutMs * 2)
    return new LeaseSession(client, lease.id, timing, now, hooks, sentAt, keeper)
  }

  /** The keeper's thread takes over the renewals (this thread's loop stops at its next turn). */
  private handOver(keeper: LeaseKeeper): void {
    if (this.endReason !== null || this.kept !== null) return
    // The keeper's stamps are process.hrtime (CLOCK_MONOTONIC, as performance.now): handed over as an age.
    const sentAtHr = process.hrtime.bigint() - BigInt(Math.max(0, Math.round((this.now() - this.lastRenewSentAt) * 1e6)))
    this.kept = keeper.keep(this.leaseId, this.timing, sentAtHr, {
      onRenewed: () => this.hooks.onRenewed?.(),
      onGone: () => this.end('lease_gone'),
      onRenewError: (err) => this.hooks.onRenewError?.(err),
    })
    this.wakeLoop?.()
    this.armDeadline()
  }

  /** Why the session ended, or null while it runs. */
  get ended(): SessionEndReason | null {
    return this.endReason
  }

  /** True while the renew deadline has not passed; when it has, ends the session now (synchronously). */
  alive(): boolean {
    if (this.endReason !== null) return false
    // One reading of `now`, taken first: a delay between two readings can only make the renewal look older.
    const now = this.now()
    if (this.kept !== null) {
      // the keeper's stamp is process.hrtime (CLOCK_MONOTONIC, as performance.now): carried over as an age
      const ageMs = Number(process.hrtime.bigint() - this.kept.lastRenewSentAt()) / 1e6
      this.lastRenewSentAt = Math.max(this.lastRenewSentAt, now - ageMs)
    }
    if (now - this.lastRenewSentAt < this.timing.renewDeadlineMs) return true
    this.end('renew_deadline')
    return false
  }

  /** Stops renewing and reports `reason` (once); the lease itself stays until revoked or expired. */
  end(reason: SessionEndReason): void {
    if (this.endReason !== null) return
    this.endReason = reason
    clearTimeout(this.deadlineTimer)
    this.kept?.stop()
    this.wakeLoop?.()
    this.hooks.onEnd(reason)
  }

  /** Ends the session and revokes the lease (its election key goes with it), once; false if etcd could not be told. */
  revoke(): Promise<boolean> {
    this.end('closed')
    this.revoking ??= revokeLease(this.client, this.leaseId, this.timing.attemptTimeoutMs * 2)
    return this.revoking
  }

  private armDeadline(): void {
    clearTimeout(this.deadlineTimer)
    const wait = this.lastRenewSentAt + this.timing.renewDeadlineMs - this.now()
    // Checked after the event loop's poll phase (setImmediate): when a busy loop makes this timer late,
    // a renewal answered in time is read first. Every act still checks the deadline itself (alive()).
    // With a keeper nothing on this thread learns of renewals: the check re-arms itself while alive.
    this.deadlineTimer = setTimeout(
      () =>
        setImmediate(() => {
          if (this.alive() && this.kept !== null) this.armDeadline()
        }),
      Math.max(0, wait) + 1,
    )
  }

  private async renewLoop(): Promise<void> {
    while (this.kept === null && this.alive()) {
      const sentAt = this.now()
      const ok = await this.renewOnce(sentAt)
      if (this.endReason !== null || this.kept !== null) return
      // The interval counts from the renewal's sending: when the loop is busy and answers are read
      // late, the next renewal goes out at once (in the same loop turn, not a timer's turn later).
      const wait = ok ? sentAt + this.timing.renewIntervalMs - this.now() : this.timing.retryDelayMs
      if (wait > 0) await this.pause(wait)
    }
  }

  /** One keepalive; true when etcd accepted it. */
  private async renewOnce(sentAt: number): Promise<boolean> {
    const left = this.lastRenewSentAt + this.timing.renewDeadlineMs - sentAt
    try {
      const ttl = await this.client.keepAliveOnce(this.leaseId, Math.max(1, Math.min(this.timing.attemptTimeoutMs, left)))
      if (this.endReason !== null) return false
      if (ttl <= 0) {
        this.end('lease_gone')
        return false
      }
      this.lastRenewSentAt = Math.max(this.lastRenewSentAt, sentAt)
      if (!this.alive()) return false // the answer came, but too late to count
      this.armDeadline()
      this.hooks.onRenewed?.()
      return true
    } catch (err) {
      if (err instanceof EtcdClientError && err.kind === 'lease_not_found') this.end('lease_gone')
      else if (this.endReason === null) this.hooks.onRenewError?.(err as Error)
      return false
    }
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms)
      function done() {
        clearTimeout(timer)
        resolve()
      }
      this.wakeLoop = done
    })
  }
}
