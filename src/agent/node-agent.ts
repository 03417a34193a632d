/**
 * The node agent (SPEC "Node agent"): checks in every lease/3 (±10 %), verifies each plan against the
 * pinned keys, stops what a plan takes away and then reports at once (depositing the sessions those
 * stops left for the new owners), claims Identify before each start (or is handed a session to resume),
 * and stops everything before its authority ends. No global state: many agents can share one process,
 * each with its own identity, clock and logger.
 */
import { pino, type Logger } from 'pino'
import type { Registry } from 'prom-client'
import { describe, logEvent, runnerHooks, type AgentEvent, type HaltReason } from './agent-events.js'
import { AgentMetrics } from './agent-metrics.js'
import { AGENT_DEFAULTS, assertValidOptions, defaultStopMarginMs, defaultStopTimeoutMs, type NodeAgentOptions, type ShardHealth } from './agent-options.js'
import type { AgentEnd, AgentState, AgentStatus } from './agent-status.js'
import { CheckinCadence } from './cadence.js'
import type { CheckinBody } from '../core/schemas.js'
import { checkinBody, judgeCheckinAnswer } from './checkin-exchange.js'
import { ClaimScheduler, type ClaimOutcome, type ClaimReply } from './claim-scheduler.js'
import { Alarm, systemClock, type AgentClock } from './clock.js'
import { CertificateRefusedError, ControllerClient, ControllerUnreachableError } from './controller-client.js'
import { checkInDepositing, type SentCheckin } from './depositing-checkin.js'
import { MemoryGenerationStore, type GenerationStore } from './generation-store.js'
import { claimIdentify } from './identify-claim.js'
import { loadBundle, type NodeIdentity } from './identity.js'
import { CertificateRenewer } from './cert-renewer.js'
import { enrolledIdentity, type EnrollAgentOptions } from './enrolled-identity.js'
import type { PinnedKeys } from './pinned-keys.js'
import { PlanManager, type AuthorityLoss } from './plan-manager.js'
import { RequestBudget, DEFAULT_REQUEST_BUDGET } from './request-budget.js'
import { RestShareFeed } from './rest-share.js'
import { retrySlackMs } from './retry-slack.js'
import { SessionDeposits, type SessionEntry } from './session-deposits.js'
import { leaveWaitMs, sendLeave } from './leave-checkin.js'
import type { PlanClaims } from './plan-claims.js'
import { ShardRunner } from './shard-runner.js'
import { keyShard, keyTotal } from './shard-key.js'

const SILENT = pino({ enabled: false })
/**
 * How long a retry is assumed to take to be answered: a controller admits a node that comes back from a
 * deferral while its queue of handshakes is within 4 s (server/admission.ts returningBudgetMs: such nodes
 * go ahead of newcomers, whose budget is 3 s), so an admitted attempt can wait about 4 s; half a second more covers the
 * handshake and the answer. A dead controller fails the attempt at connect. (With 2 s, the nodes that
 * came back last were admitted into a 4 s queue and answered after their fail-safe had begun.)
 */
export const ATTEMPT_RESERVE_MS = 4500
/** What short leases keep (the reserve before it was raised): they have no 4.5 s to spare. */
const MIN_ATTEMPT_RESERVE_MS = 2000

/**
 * The reserve for a lease (ms): ATTEMPT_RESERVE_MS, but at most lease/6, so that a short lease keeps
 * slack to spread its retries over (the fail-safe comes lease/3 after a check-in is due; with the whole
 * 4.5 s reserved, a lease under about 15 s would have none and every node would retry at once, 0.25-0.75 s
 * apart) and the reserve stays within an attempt's own timeout (lease/3); never below the 2 s it was.
 * (Such a short reserve is below what a busy controller may queue a returning node for, 4 s: a fleet on
 * leases under 27 s trades some of a storm's late answers for retries spread over its slack.)
 */
export function attemptReserveMs(leaseMs: number): number {
  return Math.max(MIN_ATTEMPT_RESERVE_MS, Math.min(ATTEMPT_RESERVE_MS, Math.floor(leaseMs / 6)))
}

/** One node's side of the protocol; see the module comment and README.md "Node agent". */
export class NodeAgent {
  /** The certificate's CN. */
  readonly nodeId: string
  /** Resolves once the agent halted and every shard stopped (stop(), or a definitive refusal of its certificate). */
  readonly closed: Promise<AgentEnd>
  /**
   * This agent's metrics (docs/monitoring.md "Node agent metrics") on a registry of its own, never prom-client's
   * global one: serve `await agent.metrics.metrics()` with `agent.metrics.contentType`.
   */
  readonly metrics: Registry
  private readonly metricsObserver: AgentMetrics
  private readonly clock: AgentClock
  private readonly logger: Logger
  private readonly client: ControllerClient
  private readonly budget: RequestBudget
  private readonly runner: ShardRunner
  private readonly scheduler: ClaimScheduler
  private readonly plans: PlanManager
  private readonly store: GenerationStore
  private readonly deposits: SessionDeposits
  private readonly checkinAlarm: Alarm
  private readonly cadence: CheckinCadence
  private pinned: PinnedKeys
  /** The identity new connections present (replaced by each renewal). */
  private identity: NodeIdentity
  private readonly renewer: CertificateRenewer | null
  private floor: number | null = null
  private started = false
  /** From the moment leave() begins: no check-in but the leave goes out. */
  private departing = false
  private leaving: Promise<AgentEnd> | null = null
  private halt: AgentEnd | null = null
  private resolveClosed!: (end: AgentEnd) => void
  private inFlight = false
  private again = false
  private lastSentAt: number | null = null
  private lastAckAt: number | null = null
  private lastError: string | null = null
  /** The REST proxy's share and demand, when the host gave one. */
  private readonly rest: RestShareFeed | null

  /** Builds an agent (nothing happens until start()); throws RangeError on a bad option. */
  constructor(private readonly opts: NodeAgentOptions) {
    assertValidOptions(opts)
    this.nodeId = opts.identity.nodeId
    this.identity = opts.identity
    this.pinned = opts.identity.pinnedKeys
    this.clock = opts.clock ?? systemClock
    this.logger = (opts.logger ?? SILENT).child({ node_id: this.nodeId })
    this.store = opts.generationStore ?? new MemoryGenerationStore()
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve))
    this.cadence = new CheckinCadence(() => this.clock.random(), () => this.clock.now())
    this.client = this.newClient()
    const budget = opts.requestBudget ?? DEFAULT_REQUEST_BUDGET
    this.budget = new RequestBudget(budget.perSecond, budget.burst, () => this.clock.now())
    this.deposits = new SessionDeposits({ clock: this.clock, dropped: (reason, shardIds, detail) => this.emit({ type: 'sessions_dropped', reason, shardIds, detail }) })
    this.runner = new ShardRunner(opts, runnerHooks((event) => this.emit(event)), {
      clock: this.clock,
      stopTimeoutMs: () => stopTimeoutFor(opts, this.cadence.lease),
      claimFresh: (shardId, signal) => this.scheduler.claimFresh(shardId, signal),
    })
    this.scheduler = this.newScheduler()
    this.plans = this.newPlanManager()
    this.checkinAlarm = new Alarm(this.clock, () => this.checkInNow())
    this.metricsObserver = new AgentMetrics({ status: () => this.status(), health: () => this.shardHealth(), certificateExpiry: () => this.identity.notAfter })
    this.metrics = this.metricsObserver.registry
    this.rest = opts.restProxy === undefined ? null : new RestShareFeed(opts.restProxy, this.clock, this.logger)
    opts.restProxy?.registerMetrics(this.metrics)
    this.renewer = opts.renewCertificate === false ? null : this.newRenewer()
  }

  private newRenewer(): CertificateRenewer {
    return new CertificateRenewer({
      clock: this.clock,
      logger: this.logger,
      ...(this.opts.renewAtFraction === undefined ? {} : { renewAt: this.opts.renewAtFraction }),
      current: () => this.identity,
      post: (path, body) => this.client.post(path, body),
      get: (path) => this.client.get(path),
      adopt: (identity) => this.adoptIdentity(identity),
      emit: (event) => this.emit(event),
    })
  }

  /**
   * Switches to a renewed identity: new connections present it (the client waits for the requests in
   * flight and lets only check-ins out until one is answered), and a check-in goes at once, so that the
   * controller records the rotation before any claim presents the new certificate. No shard stops.
   */
  private async adoptIdentity(next: NodeIdentity): Promise<void> {
    await this.client.switchIdentity(next.cert, next.key)
    this.identity = next
    this.pinned = next.pinnedKeys
    this.checkInNow()
    try {
      await this.opts.onIdentityRenewed?.(next)
    } catch (err) {
      this.logger.error({ err: describe(err) }, 'onIdentityRenewed failed')
    }
  }

  /** The identity new connections present: the one given, or the latest renewal. */
  get currentIdentity(): NodeIdentity {
    return this.identity
  }

  private newClient(): ControllerClient {
    const { identity, controllers } = this.opts
    const limit = this.opts.requestTimeoutMs ?? AGENT_DEFAULTS.requestTimeoutMs
    return new ControllerClient({
      urls: controllers, ca: identity.ca, cert: identity.cert, key: identity.key, clock: this.clock,
      // A request may not outlast a third of the lease, so that failover happens while authority holds.
      requestTimeoutMs: () => {
        const lease = this.cadence.lease
        return lease === null ? limit : Math.min(limit, Math.max(lease / 3, 500))
      },
    })
  }

  private newScheduler(): ClaimScheduler {
    return new ClaimScheduler({
      clock: this.clock,
      budget: this.budget,
      claim: (shardId, fresh) => this.claim(shardId, fresh),
      onGranted: (key, generation, resume, claimedAt) => this.plans.granted(key, resume, claimedAt, generation),
      onOutcome: (shardId, outcome, waitedMs) => this.onClaimOutcome(shardId, outcome, waitedMs),
      identifyIntervalMs: this.opts.identifyIntervalMs ?? AGENT_DEFAULTS.identifyIntervalMs,
      handoffPollMs: this.opts.handoffPollMs ?? AGENT_DEFAULTS.handoffPollMs,
    })
  }

  private newPlanManager(): PlanManager {
    const { stopMarginMs, startRetryMs } = this.opts
    return new PlanManager({
      clock: this.clock,
      nodeId: this.nodeId,
      runner: this.runner,
      scheduler: this.scheduler,
      stopMarginMs: (leaseMs) => stopMarginMs ?? defaultStopMarginMs(leaseMs),
      stopTimeoutMs: (leaseMs) => stopTimeoutFor(this.opts, leaseMs),
      leaseTooShort: (detail) => this.haltNow('stop_timeout_too_long', detail),
      startRetryMs: startRetryMs ?? AGENT_DEFAULTS.startRetryMs,
      reportNow: () => this.checkInNow(),
      keepSession: (shardId, value, generation) => this.deposits.keep(shardId, value, generation),
      authorityLost: (reason: AuthorityLoss) => {
        this.rest?.drop() // no authority, no sending: whatever the plan's `until` says
        if (reason !== 'shutdown') this.emit({ type: 'authority_lost', reason })
      },
    })
  }

  /** Loads a bundle folder (key.pem, cert.pem, ca.pem, plan-jwks.json) and builds an agent from it. */
  static async fromBundle(dir: string, opts: Omit<NodeAgentOptions, 'identity'>): Promise<NodeAgent> {
    return new NodeAgent({ ...opts, identity: await loadBundle(dir) })
  }

  /**
   * Enrolls (docs/node-library.md "Enrollment") and builds an agent from the identity issued. With
   * `stateDir`, an identity kept there is used again when it still holds (no enrollment), a new one is
   * kept there, and so is every renewal. Throws EnrollmentDeniedError when the signer denies it.
   */
  static async enroll(opts: Omit<NodeAgentOptions, 'identity'> & { readonly enrollment: EnrollAgentOptions }): Promise<NodeAgent> {
    const { enrollment, ...rest } = opts
    const { identity, keep } = await enrolledIdentity(enrollment, rest.logger ?? SILENT, rest.clock ?? systemClock)
    const renewed = rest.onIdentityRenewed
    return new NodeAgent({
      ...rest,
      identity,
      onIdentityRenewed: keep === null ? renewed : async (next) => {
        await keep(next)
        await renewed?.(next)
      },
    })
  }

  /** Reads the stored generation floor (throws StateFileError on a damaged file) and starts checking in. */
  async start(): Promise<void> {
    if (this.started) throw new Error('the agent was already started')
    this.started = true
    this.floor = await this.store.load()
    this.logger.info({ controllers: this.opts.controllers, capacity: this.opts.capacity, stored_generation: this.floor }, 'node agent starting')
    this.checkInNow()
    this.renewer?.start()
  }

  /** Stops every shard (reason shutdown) and all activity; resolves once done. */
  async stop(): Promise<AgentEnd> {
    this.haltNow('shutdown', 'stopped by the host')
    return this.closed
  }

  /**
   * Leaves on purpose (SPEC "Leaving on purpose"; pxe-node's SIGTERM): stops every shard (reason `leave`,
   * keeping each resumable session), sends one last check-in with `"leaving": true` and those sessions,
   * waits for its answer (at most min(5 s, lease/3), failing over like a check-in), then halts as stop()
   * does. The controller moves the shards at once and their new owners RESUME. When a stop fails (the
   * shard may still run, so it must not move yet) or no answer comes, the node's lease runs out instead,
   * as after stop(). Resolves once the agent halted; calling it again returns the same promise.
   */
  leave(): Promise<AgentEnd> {
    this.leaving ??= this.leaveOnce()
    return this.leaving
  }

  /**
   * Stops at once (pxe-node's second signal): stops under way are cut short (a stop command is killed
   * with its process group; the shard MAY STILL BE RUNNING: event shard_stop_cut_short), a leave not yet
   * sent is not sent, one in flight is abandoned, and shards not yet stopping are stopped as by stop().
   */
  stopNow(): Promise<AgentEnd> {
    this.runner.hurry() // before the halt: the stops it asks for are not cut short
    this.haltNow('shutdown', 'stopped at once by the host')
    this.client.close()
    return this.closed
  }

  private async leaveOnce(): Promise<AgentEnd> {
    if (!this.started || this.halt !== null) return this.stop()
    this.departing = true
    this.checkinAlarm.cancel()
    this.renewer?.stop()
    this.scheduler.stop()
    const plan = this.plans.accepted
    this.plans.leave()
    this.rest?.drop()
    this.deposits.prune(plan?.assigned ?? [])
    this.logger.info({ shards: this.runner.held().length }, 'leaving: stopping every shard')
    const stopped = await this.stopForLeave(plan)
    if (this.halt !== null) return this.closed // stop() or stopNow() came meanwhile
    if (!stopped) {
      this.emit({ type: 'leave_failed', detail: 'not every shard stopped (a stop failed or timed out, so its shard may still run): no leave is sent' })
    } else {
      // Every shard stopped, so every removal of the accepted plan too: its generation is applied.
      const generation = plan === null ? this.plans.appliedGeneration : Math.max(plan.generation, this.plans.appliedGeneration ?? 0)
      // Assigned shards are this node's to deposit now (the controller accepts them from a leave).
      const batch = this.deposits.batchFor(generation, [])
      await sendLeave(batch, {
        clock: this.clock,
        deposits: this.deposits,
        waitMs: leaveWaitMs(this.cadence.lease),
        send: (sessions) => this.sendCheckin(generation, sessions, true),
        emit: (event) => this.emit(event),
      })
    }
    this.haltNow('shutdown', 'left on purpose')
    return this.closed
  }

  /** Stops every shard for a leave; true when all stopped. Only the plan's own shards keep a session. */
  private async stopForLeave(plan: PlanClaims | null): Promise<boolean> {
    const keeps = (key: number) =>
      plan !== null && keyTotal(key) === plan.total_shards && plan.assigned.includes(keyShard(key)) && this.runner.sessionValues(key)?.maxConcurrency === plan.max_concurrency
    const stops = this.runner.held().map((key) =>
      this.runner.stop(key, 'leave', keeps(key) ? (value: unknown) => this.deposits.keep(keyShard(key), value, plan!.generation) : undefined),
    )
    return (await Promise.all(stops)).every(Boolean)
  }

  /** Checks in now (or right after the check-in in flight). */
  checkInNow(): void {
    if (!this.started || this.halt !== null || this.departing) return
    if (this.inFlight) {
      this.again = true
      return
    }
    this.inFlight = true
    this.checkinAlarm.cancel()
    void this.checkInOnce()
      .catch((err: unknown) => {
        this.logger.error({ err: describe(err) }, 'check-in failed unexpectedly')
        return this.retryDelay(null)
      })
      .then((delay) => {
        this.inFlight = false
        if (delay === null || this.halt !== null || this.departing) return
        const next = this.again ? 0 : delay
        this.again = false
        this.checkinAlarm.arm(next)
      })
  }

  /** Replaces the pinned plan keys (after the bundle's plan-jwks.json was updated for a rotation). */
  setPinnedKeys(keys: PinnedKeys): void {
    this.pinned = keys
  }

  /** The agent's state for monitoring. */
  status(): AgentStatus {
    const toWall = (t: number | null) => (t === null ? null : Math.round(this.clock.wallNow() - (this.clock.now() - t)))
    const plan = this.plans.accepted
    const current = this.shardsOfSet('current')
    const next = this.shardsOfSet('next')
    return {
      nodeId: this.nodeId,
      state: this.state(),
      acceptedGeneration: plan?.generation ?? null,
      reportedGeneration: this.plans.appliedGeneration,
      assigned: plan?.assigned ?? [],
      running: current(this.runner.inPhase('running')),
      starting: current(this.runner.inPhase('starting')),
      stopping: current(this.runner.inPhase('stopping')),
      failed: current(this.runner.inPhase('failed')),
      claiming: current(this.scheduler.pending),
      next:
        plan?.next === undefined
          ? null
          : { totalShards: plan.next.total_shards, assigned: plan.next.assigned, running: next(this.runner.inPhase('running')), starting: next(this.runner.inPhase('starting')), claiming: next(this.scheduler.pending) },
      lastRenewalSentAt: toWall(this.lastSentAt),
      lastRenewalAckAt: toWall(this.lastAckAt),
      authorityEndsAt: toWall(this.plans.authorityDeadline),
      controller: this.client.currentUrl,
      lastError: this.lastError,
      halted: this.halt,
    }
  }

  /**
   * The shard numbers of one set among runner or scheduler keys, ascending. `current`: the accepted plan's
   * shard count, and every other count but a live reshard's next one (old-set shards still stopping).
   */
  private shardsOfSet(set: 'current' | 'next'): (keys: readonly number[]) => number[] {
    const nextTotal = this.plans.accepted?.next?.total_shards ?? null
    return (keys) => keys.filter((key) => (keyTotal(key) === nextTotal) === (set === 'next')).map(keyShard).sort((a, b) => a - b)
  }

  private state(): AgentState {
    if (this.halt !== null) return 'halted'
    if (!this.started) return 'idle'
    if (this.plans.accepted === null) return 'joining'
    return this.plans.hasAuthority() ? 'active' : 'no_authority'
  }

  private emit(event: AgentEvent): void {
    logEvent(this.logger, event)
    this.metricsObserver.observe(event)
    try {
      this.opts.onEvent?.(event)
    } catch (err) {
      this.logger.error({ err: describe(err) }, 'onEvent threw')
    }
  }

  /** One check-in; returns the delay before the next one, or null when the agent halted. */
  private async checkInOnce(): Promise<number | null> {
    // The sessions due go into the very check-in that reports their generation: it releases their handoffs.
    const generation = this.plans.appliedGeneration
    const batch = this.deposits.batchFor(generation, this.plans.accepted?.assigned ?? [])
    const sent = await checkInDepositing(batch, {
      deposits: this.deposits,
      send: (sessions) => this.sendCheckin(generation, sessions),
      emit: (event) => this.emit(event),
    })
    if ('error' in sent) return this.onRequestError(sent.error)
    const { reply, sentAt } = sent
    if (reply.status === 200) return this.onCheckinAnswer(reply.body, reply.url, sentAt)
    if (reply.status === 403) {
      this.refuseCertificate(true, `${reply.url} answered 403 ${reply.errorCode ?? ''}`.trim())
      return null
    }
    this.fail(`check-in answered ${reply.status} ${reply.errorCode ?? ''}${reply.errorMessage ? `: ${reply.errorMessage}` : ''}`)
    return reply.status === 429 ? Math.max(reply.retryAfterMs ?? 1000, 100) : this.retryDelay(null)
  }

  private async onCheckinAnswer(body: unknown, url: string, sentAt: number): Promise<number | null> {
    const previous = this.plans.accepted
    const verdict = await judgeCheckinAnswer(body, this.pinned, {
      nodeId: this.nodeId,
      nowMs: this.clock.wallNow(),
      lastGeneration: maxOrNull(this.floor, previous?.generation ?? null),
      clockSkewMs: this.opts.clockSkewMs ?? AGENT_DEFAULTS.clockSkewMs,
    })
    if (verdict.kind === 'malformed') {
      this.fail(`the check-in answer from ${url} is not the SPEC's shape`)
      return this.retryDelay(null)
    }
    if (verdict.kind === 'refused') {
      this.cadence.setLease(verdict.leaseSeconds * 1000)
      this.emit({ type: 'plan_refused', reason: verdict.reason, detail: verdict.detail, controller: url })
      return this.cadence.next()
    }
    if (this.halt !== null) return null
    const plan = verdict.plan
    this.cadence.setLease(plan.lease_seconds * 1000)
    await this.raiseFloor(plan.generation)
    this.plans.accept(plan, sentAt)
    if (this.halt !== null) return null // the plan's lease cannot hold the stop timeout: halted, nothing taken
    this.rest?.apply(plan, sentAt, this.plans.hasAuthority())
    this.lastSentAt = sentAt
    this.lastAckAt = this.clock.now()
    this.lastError = null
    const changed = previous === null || previous.generation !== plan.generation || previous.assigned.join() !== plan.assigned.join()
    this.emit({ type: 'plan_accepted', generation: plan.generation, assigned: plan.assigned, changed, controller: url })
    return this.cadence.next()
  }

  /** Persists a higher generation; a write failure is logged, not fatal (the plan itself is valid). */
  private async raiseFloor(generation: number): Promise<void> {
    if (this.floor !== null && generation <= this.floor) return
    try {
      await this.store.save(generation)
      this.floor = generation
    } catch (err) {
      this.logger.error({ err: describe(err), generation }, 'cannot store the accepted generation; a restart would lose the rollback floor')
    }
  }

  private onRequestError(err: unknown): number | null {
    if (err instanceof CertificateRefusedError) {
      this.refuseCertificate(true, err.message)
      return null
    }
    if (!(err instanceof ControllerUnreachableError)) throw err
    this.fail(err.message)
    if (err.probableRefusal) this.refuseCertificate(false, `the certificate is probably revoked or expired, but ${err.refusalDetail}`)
    return this.retryDelay(err.busyRetryAfterMs)
  }

  /**
   * The delay before the next attempt after a failed one, from what is at stake (cadence.ts): the time
   * left until the last check-in that could still be answered before the fail-safe begins, or, once it
   * has, before the lease ends and the controller would move the node's range (retry-slack.ts; an
   * attempt is given attemptReserveMs to be answered, a busy controller's promise).
   */
  private retryDelay(busyRetryAfterMs: number | null): number {
    const plan = this.plans.accepted
    const leaseMs = plan === null ? null : plan.lease_seconds * 1000
    const slackMs =
      leaseMs === null
        ? null
        : retrySlackMs({ now: this.clock.now(), authorityEndsAt: this.plans.leaseDeadline, failSafeLeadMs: this.plans.failSafeLeadMs(leaseMs), reserveMs: attemptReserveMs(leaseMs) })
    return this.cadence.retry({ slackMs, busyRetryAfterMs })
  }

  /**
   * A definitive refusal (every controller URL refused the certificate on new connections, twice in a
   * row: controller-client.ts) stops every shard at once and halts the agent. A probable one (some
   * controllers only, or not repeated) is reported and changes nothing else: the agent keeps trying, and
   * the fail-safe stops the shards as for any controller it cannot reach, unless a renewal comes first.
   */
  private refuseCertificate(definitive: boolean, detail: string): void {
    this.emit({ type: 'certificate_refused', definitive, detail })
    if (definitive) this.haltNow('certificate_refused', detail)
  }

  private haltNow(reason: HaltReason, detail: string): void {
    if (this.halt !== null) return
    this.halt = { reason, detail }
    this.rest?.drop()
    this.checkinAlarm.cancel()
    this.renewer?.stop()
    this.scheduler.stop()
    // A stop timeout the lease cannot hold is a configuration error: the agent ends as at shutdown.
    const loss = reason === 'certificate_refused' ? 'certificate_refused' : 'shutdown'
    this.plans.loseAuthority(loss)
    this.plans.close()
    void this.runner.stopAll(loss).then(() => {
      this.client.close()
      this.emit({ type: 'halted', reason, detail })
      this.resolveClosed(this.halt!)
    })
  }

  private fail(detail: string): void {
    this.lastError = detail
    this.emit({ type: 'checkin_failed', detail })
  }

  /** Sends one check-in reporting `generation` (authority counts from its send time); `leaving`: the last one. */
  private async sendCheckin(generation: number | null, sessions: readonly SessionEntry[], leaving = false): Promise<SentCheckin> {
    const sentAt = this.clock.now()
    this.budget.spend() // a check-in never waits for the budget, but counts against it
    try {
      return { sentAt, reply: await this.client.post('/v1/checkin', leaving ? this.leaveBody(generation, sessions) : this.checkinBody(generation, sessions)) }
    } catch (error) {
      return { sentAt, error }
    }
  }

  private checkinBody(generation: number | null, sessions: readonly SessionEntry[]): CheckinBody {
    const body = checkinBody(this.nodeId, this.opts.capacity, this.shardHealth(), generation, sessions)
    // always sent (0 without a reshard): it tells the controller this agent runs a next set
    return { ...body, next_ready_shards: this.nextReadyShards() ?? 0, ...(this.rest === null ? {} : { rest_demand: this.rest.demand() }) }
  }

  /** The leave: capacity as usual, every count 0 (every shard stopped), `"leaving": true`. */
  private leaveBody(generation: number | null, sessions: readonly SessionEntry[]): CheckinBody {
    const none = { ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 }
    return { ...checkinBody(this.nodeId, this.opts.capacity, none, generation, sessions), leaving: true }
  }

  /**
   * During a live reshard: the next-set shards of the accepted plan that run (the controller switches once
   * every node reports all of its own), counted only once the plan that carries them is applied; else null.
   */
  private nextReadyShards(): number | null {
    const plan = this.plans.accepted
    if (plan?.next === undefined) return null
    const wanted = new Set(plan.next.assigned)
    return Math.min(128, this.shardsOfSet('next')(this.runner.inPhase('running')).filter((shardId) => wanted.has(shardId)).length)
  }

  /** The shard counts a check-in reports (and the metrics show): the host's, or the agent's own view (current set). */
  private shardHealth(): ShardHealth {
    // of the plan's own shard count: an old set still running out a switch's grace is not reported
    const total = this.plans.accepted?.total_shards ?? null
    const current = (keys: readonly number[]) => (total === null ? keys : keys.filter((key) => keyTotal(key) === total))
    return this.opts.health?.() ?? {
      ready_shards: current(this.runner.inPhase('running')).length,
      starting_shards: current(this.runner.inPhase('starting')).length + current(this.scheduler.pending).length,
      backoff_shards: 0,
      fatal_shards: current(this.runner.inPhase('failed')).length,
    }
  }

  private async claim(key: number, fresh: boolean): Promise<ClaimReply> {
    const set = this.plans.setOf(key)
    if (set === null) return { outcome: { kind: 'not_owner' }, resume: null } // a shard count the plan no longer has
    try {
      return await claimIdentify(this.client, this.nodeId, keyShard(key), fresh, set)
    } catch (err) {
      if (err instanceof CertificateRefusedError) this.refuseCertificate(true, err.message)
      return { outcome: { kind: 'failed', detail: describe(err) }, resume: null }
    }
  }

  private onClaimOutcome(key: number, outcome: ClaimOutcome, waitedMs: number | null): void {
    const set = this.plans.setOf(key)
    this.emit({ type: 'claim', shardId: keyShard(key), ...(set === 'next' ? { set } : {}), outcome, waitedMs })
    // The controller's plan moved on: learn it now rather than at the next regular check-in.
    if (outcome.kind === 'not_owner') this.checkInNow()
  }
}

/** The stop timeout in force: the option, or the lease's default (before any lease is known: the longest). */
function stopTimeoutFor(opts: NodeAgentOptions, leaseMs: number | null): number {
  if (opts.stopTimeoutMs !== undefined) return opts.stopTimeoutMs
  return leaseMs === null ? AGENT_DEFAULTS.maxStopTimeoutMs : defaultStopTimeoutMs(leaseMs)
}

function maxOrNull(a: number | null, b: number | null): number | null {
  if (a === null) return b
  if (b === null) return a
  return Math.max(a, b)
}
