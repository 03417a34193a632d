/**
 * Leader election on etcd, after etcd's own `concurrency.Election` and client-go's leaderelection:
 * every replica holds a lease (`LeaseSession`) and puts `<prefix>election/<lease id>` = its
 * controller_id on it; the key with the lowest create revision leads. A leader stops leading on its own
 * once its lease was not renewed within the renew deadline (2/3 TTL), before etcd can expire the lease
 * and elect another; it then campaigns again with a new lease. The fence (election key, its create
 * revision and lease) is what every write of the leader is guarded by (fenced-write.ts).
 */
import { performance } from 'node:perf_hooks'
import { prefixRangeEnd, type EtcdClient, type EtcdWatch } from './etcd-api.js'
import type { LeaseKeeper } from './lease-keeper.js'
import { LeaseSession, leaseTiming, revokeLease, type LeaseTiming, type MonotonicClock, type SessionEndReason } from './lease-session.js'

/** What a leader's writes are guarded by: its election key must still exist with this create revision and lease. */
export interface Fence {
  readonly key: string
  readonly createRevision: string
  readonly leaseId: string
  readonly controllerId: string
}

/** Why a leader stopped leading. */
export type StepDownReason = SessionEndReason

/**
 * Callbacks named as client-go's (which runs each on a goroutine of its own). Here they run synchronously
 * on the event loop, in the order the events happen, and must not throw (errors go to `onError`).
 */
export interface LeadershipEvents {
  onStartedLeading?(fence: Fence): void
  /** Answer 503 `unavailable` from here on: this replica may no longer act as leader. */
  onStoppedLeading?(reason: StepDownReason): void
  /** The controller_id of the current leader (this replica's own included), or null when there is none. */
  onNewLeader?(controllerId: string | null): void
  /** A failed etcd call or a throwing callback; the election goes on. */
  onError?(err: Error, during: 'campaign' | 'observe' | 'renew' | 'callback'): void
}

/** How a replica takes part in the election. */
export interface LeadershipOptions {
  readonly client: EtcdClient
  /** The HA key prefix, e.g. `/pxe/`; the election lives under `<prefix>election/`. */
  readonly prefix: string
  readonly controllerId: string
  readonly leaseTtlSeconds: number
  readonly events?: LeadershipEvents
  /** Monotonic milliseconds; performance.now unless a test needs another. */
  readonly now?: MonotonicClock
  /** Renews the lease on a thread of its own (lease-keeper.ts; the controller uses one); else this thread does. */
  readonly keeper?: LeaseKeeper
}

/** True when two fences name the same term (key, create revision and lease). */
export const sameFence = (a: Fence, b: Fence) => a.key === b.key && a.createRevision === b.createRevision && a.leaseId === b.leaseId

/** One replica's part in the election: campaigns from `start()` until `close()`. */
export class Leadership {
  private readonly timing: LeaseTiming
  private readonly electionPrefix: string
  private readonly now: MonotonicClock
  private session: LeaseSession | null = null
  private candidate: Fence | null = null
  private leading = false
  private leader: string | null = null
  private watch: EtcdWatch | null = null
  private campaignTimer: NodeJS.Timeout | undefined
  private evaluating = false
  private evaluateAgain = false
  private closed = false
  private campaignFailures = 0
  /** After resign(): no campaign before this (monotonic ms). */
  private pauseUntil = 0
  /** Our old leases that etcd could not be told to revoke (it was unreachable); retried on the next campaign. */
  private readonly staleLeases = new Set<string>()

  constructor(private readonly options: LeadershipOptions) {
    this.timing = leaseTiming(options.leaseTtlSeconds)
    this.electionPrefix = `${options.prefix}election/`
    this.now = options.now ?? (() => performance.now())
  }

  /** Starts campaigning and watching the election. */
  start(): void {
    if (this.watch || this.closed) return
    this.watch = this.options.client.watchPrefix(this.electionPrefix, () => this.requestEvaluation())
    void this.campaign()
  }

  /** True while this replica leads; checks the renew deadline first, so a woken process learns at once. */
  get isLeader(): boolean {
    return this.leading && this.session !== null && this.session.alive()
  }

  /** The controller_id of the leader as last seen in etcd (possibly this replica), or null. */
  get leaderId(): string | null {
    return this.leader
  }

  /** The fence to guard a write with, or null when this replica does not lead (deadline checked now). */
  fence(): Fence | null {
    return this.isLeader ? this.candidate : null
  }

  /** etcd refused a write guarded by `fence`: when that is our current term, stop leading now. */
  fenceRefused(fence: Fence): void {
    if (this.candidate && sameFence(fence, this.candidate)) this.session?.end('fence_refused')
  }

  /**
   * Stops leading now (its lease is revoked, so another replica can lead at once) and stays out of the
   * election for `pauseMs`: for a replica that cannot serve (e.g. its CRL is older than the state's).
   */
  resign(pauseMs: number): void {
    this.pauseUntil = this.now() + pauseMs
    this.session?.end('resigned')
  }

  /** Stops campaigning; a leader steps down and revokes its lease so that another takes over at once. */
  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.campaignTimer)
    const session = this.session
    await Promise.all([this.watch?.cancel(), session ? this.dropLease(session) : undefined, this.revokeStaleLeases()])
  }

  private emit(call: (events: LeadershipEvents) => void): void {
    const events = this.options.events
    if (!events) return
    try {
      call(events)
    } catch (err) {
      events.onError?.(err as Error, 'callback')
    }
  }

  private report(err: unknown, during: 'campaign' | 'observe' | 'renew'): void {
    this.emit((e) => e.onError?.(err instanceof Error ? err : new Error(String(err)), during))
  }

  /** Campaigns again soon; after failed tries the pause doubles, up to the renew interval. */
  private scheduleCampaign(): void {
    clearTimeout(this.campaignTimer)
    if (this.closed) return
    const delay = Math.min(this.timing.retryDelayMs * 2 ** this.campaignFailures, this.timing.renewIntervalMs)
    this.campaignTimer = setTimeout(() => void this.campaign(), Math.max(delay, this.pauseUntil - this.now()))
  }

  /** Opens a new lease and puts this replica's election key on it. */
  private async campaign(): Promise<void> {
    let session: LeaseSession | null = null
    try {
      session = await LeaseSession.open(this.options.client, this.timing, {
        onEnd: (reason) => this.sessionEnded(session, reason),
        onRenewed: () => this.requestEvaluation(),
        onRenewError: (err) => this.report(err, 'renew'),
      }, this.now, this.options.keeper)
      if (this.closed || !session.alive()) throw new Error('the new lease ran past its renew deadline before use')
      this.session = session
      void this.revokeStaleLeases() // etcd answers again: our old key must not stand before the new one
      const candidate = await this.putElectionKey(session)
      if (this.session !== session || !session.alive()) return
      this.candidate = candidate
      this.campaignFailures = 0
      this.requestEvaluation()
    } catch (err) {
      if (!this.closed) this.report(err, 'campaign')
      this.campaignFailures = Math.min(this.campaignFailures + 1, 10)
      if (session) void this.dropLease(session) // ends it: a current session schedules the next campaign itself
      if (this.session === null) this.scheduleCampaign()
    }
  }

  /** Puts `<prefix>election/<lease id in hex>` = controller_id on the session's lease; returns its fence. */
  private async putElectionKey(session: LeaseSession): Promise<Fence> {
    const key = `${this.electionPrefix}${BigInt(session.leaseId).toString(16)}`
    const res = await this.options.client.txn({
      compare: [{ key, target: 'create', result: 'equal', value: '0' }],
      success: [{ type: 'put', key, value: this.options.controllerId, lease: session.leaseId }],
      failure: [{ type: 'get', key }],
    })
    // a retried txn whose first try committed finds the key already there: it is still ours
    const createRevision = res.succeeded ? res.revision : res.gets[0]?.[0]?.createRevision
    if (!createRevision) throw new Error(`election key ${key} vanished right after its put`)
    return { key, createRevision, leaseId: session.leaseId, controllerId: this.options.controllerId }
  }

  /** The lease session ended: stop leading, drop the key, and campaign again with a new lease. */
  private sessionEnded(session: LeaseSession | null, reason: SessionEndReason): void {
    if (session === null || session !== this.session) return
    this.session = null
    this.candidate = null
    if (this.leading) {
      this.leading = false
      this.emit((e) => e.onStoppedLeading?.(reason))
    }
    void this.dropLease(session)
    this.scheduleCampaign()
  }

  /** Revokes a session's lease so that its election key goes at once, not a TTL later. */
  private async dropLease(session: LeaseSession): Promise<void> {
    if (!(await session.revoke())) this.staleLeases.add(session.leaseId)
  }

  private async revokeStaleLeases(): Promise<void> {
    await Promise.all(
      [...this.staleLeases].map(async (id) => {
        if (await revokeLease(this.options.client, id, this.timing.attemptTimeoutMs * 2)) this.staleLeases.delete(id)
      }),
    )
  }

  private requestEvaluation(): void {
    if (this.closed) return
    if (this.evaluating) {
      this.evaluateAgain = true
      return
    }
    this.evaluating = true
    void this.evaluateLoop().finally(() => (this.evaluating = false))
  }

  private async evaluateLoop(): Promise<void> {
    do {
      this.evaluateAgain = false
      try {
        await this.evaluateOnce()
      } catch (err) {
        this.report(err, 'observe')
      }
    } while (this.evaluateAgain && !this.closed)
  }

  /** Reads who leads now (the oldest election key) and starts or stops leading accordingly. */
  private async evaluateOnce(): Promise<void> {
    const mine = this.candidate
    const head = (
      await this.options.client.range({
        key: this.electionPrefix,
        rangeEnd: prefixRangeEnd(this.electionPrefix),
        limit: 1,
        sort: { target: 'create', order: 'ascend' },
      })
    ).kvs[0]
    if (this.closed) return
    this.setLeader(head ? head.value.toString('utf8') : null)
    // a read begun before our key was put says nothing about it
    if (mine === null || mine !== this.candidate || !this.session?.alive()) return
    const ours = head !== undefined && head.key === mine.key && head.createRevision === mine.createRevision
    if (ours && !this.leading) {
      this.leading = true
      this.emit((e) => e.onStartedLeading?.(mine))
    } else if (!ours && (this.leading || head === undefined || BigInt(head.createRevision) > BigInt(mine.createRevision))) {
      this.session.end('key_lost') // our key was deleted under us: campaign anew with a new lease
    }
  }

  private setLeader(controllerId: string | null): void {
    if (controllerId === this.leader) return
    this.leader = controllerId
    this.emit((e) => e.onNewLeader?.(controllerId))
  }
}
