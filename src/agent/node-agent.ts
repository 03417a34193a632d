/**
 * The node agent (SPEC "Node agent"): checks in every lease/3 (±10 %), verifies each plan against the
 * pinned keys, stops what a plan takes away and then reports at once, claims Identify before each
 * start, and stops everything before its authority ends. No global state: many agents can share one
 * process, each with its own identity, clock and logger.
 */
import { pino, type Logger } from 'pino'
import { logEvent, type AgentEvent, type HaltReason } from './agent-events.js'
import { AGENT_DEFAULTS, assertValidOptions, type NodeAgentOptions, type ShardHealth } from './agent-options.js'
import { ClaimScheduler, type ClaimOutcome } from './claim-scheduler.js'
import { Alarm, systemClock, type AgentClock } from './clock.js'
import { CertificateRefusedError, ControllerClient, ControllerUnreachableError } from './controller-client.js'
import { MemoryGenerationStore, type GenerationStore } from './generation-store.js'
import { loadBundle } from './identity.js'
import type { PinnedKeys } from './pinned-keys.js'
import { plainFieldMismatch } from './plan-claims.js'
import { PlanManager, type AuthorityLoss } from './plan-manager.js'
import { verifyPlanToken } from './plan-verifier.js'
import { RequestBudget, DEFAULT_REQUEST_BUDGET } from './request-budget.js'
import { ShardRunner } from './shard-runner.js'
import { checkinReplySchema, identifyReplySchema } from './wire.js'

/** Where an agent stands. */
export type AgentState = 'idle' | 'joining' | 'active' | 'no_authority' | 'halted'

/** A snapshot of the agent for its host's monitoring; times are wall-clock ms since the epoch. */
export interface AgentStatus {
  readonly nodeId: string
  readonly state: AgentState
  /** Generation of the last accepted plan (this process), or null. */
  readonly acceptedGeneration: number | null
  /** Generation reported in check-ins: the newest plan whose removals are all stopped. */
  readonly reportedGeneration: number | null
  /** Shards of the accepted plan. */
  readonly assigned: readonly number[]
  readonly running: readonly number[]
  readonly starting: readonly number[]
  readonly stopping: readonly number[]
  /** Shards whose start failed (retried after startRetryMs). */
  readonly failed: readonly number[]
  /** Shards waiting for an Identify grant. */
  readonly claiming: readonly number[]
  /** When the last check-in whose plan was accepted was sent, and when its answer came. */
  readonly lastRenewalSentAt: number | null
  readonly lastRenewalAckAt: number | null
  /** When authority over the shards ends unless renewed (null: none held). */
  readonly authorityEndsAt: number | null
  /** The controller URL in use. */
  readonly controller: string
  readonly lastError: string | null
  readonly halted: { readonly reason: HaltReason; readonly detail: string } | null
}

/** How an agent ended. */
export interface AgentEnd {
  readonly reason: HaltReason
  readonly detail: string
}

const SILENT = pino({ enabled: false })
const MAX_COUNT = 128

/** One node's side of the protocol; see the module comment and src/agent/README.md. */
export class NodeAgent {
  /** The certificate's CN. */
  readonly nodeId: string
  /** Resolves once the agent halted and every shard stopped (stop(), or a refused certificate). */
  readonly closed: Promise<AgentEnd>
  private readonly clock: AgentClock
  private readonly logger: Logger
  private readonly client: ControllerClient
  private readonly budget: RequestBudget
  private readonly runner: ShardRunner
  private readonly scheduler: ClaimScheduler
  private readonly plans: PlanManager
  private readonly store: GenerationStore
  private readonly checkinAlarm: Alarm
  private pinned: PinnedKeys
  private floor: number | null = null
  private started = false
  private halt: AgentEnd | null = null
  private resolveClosed!: (end: AgentEnd) => void
  private inFlight = false
  private again = false
  private failures = 0
  private leaseMs: number | null = null
  private lastSentAt: number | null = null
  private lastAckAt: number | null = null
  private lastError: string | null = null

  /** Builds an agent (nothing happens until start()); throws RangeError on a bad option. */
  constructor(private readonly opts: NodeAgentOptions) {
    assertValidOptions(opts)
    this.nodeId = opts.identity.nodeId
    this.pinned = opts.identity.pinnedKeys
    this.clock = opts.clock ?? systemClock
    this.logger = (opts.logger ?? SILENT).child({ node_id: this.nodeId })
    this.store = opts.generationStore ?? new MemoryGenerationStore()
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve))
    const { identity } = opts
    const requestTimeoutMs = opts.requestTimeoutMs ?? AGENT_DEFAULTS.requestTimeoutMs
    this.client = new ControllerClient({
      urls: opts.controllers, ca: identity.ca, cert: identity.cert, key: identity.key, clock: this.clock,
      // A request may not outlast a third of the lease, so that failover happens while authority holds.
      requestTimeoutMs: () => Math.min(requestTimeoutMs, this.leaseMs === null ? requestTimeoutMs : Math.max(this.leaseMs / 3, 500)),
    })
    const budget = opts.requestBudget ?? DEFAULT_REQUEST_BUDGET
    this.budget = new RequestBudget(budget.perSecond, budget.burst, () => this.clock.now())
    this.runner = new ShardRunner(opts, {
      started: (ctx) => this.emit({ type: 'shard_started', shardId: ctx.shardId, generation: ctx.generation }),
      startFailed: (ctx, err) => this.emit({ type: 'shard_start_failed', shardId: ctx.shardId, detail: describe(err) }),
      stopped: (ctx) => this.emit({ type: 'shard_stopped', shardId: ctx.shardId, reason: ctx.reason }),
      stopFailed: (ctx, err) => this.emit({ type: 'shard_stop_failed', shardId: ctx.shardId, reason: ctx.reason, detail: describe(err) }),
    }, () => this.clock.now())
    this.scheduler = new ClaimScheduler({
      clock: this.clock,
      budget: this.budget,
      claim: (shardId) => this.claim(shardId),
      onGranted: (shardId) => this.plans.granted(shardId),
      onOutcome: (shardId, outcome) => this.onClaimOutcome(shardId, outcome),
      identifyIntervalMs: opts.identifyIntervalMs ?? AGENT_DEFAULTS.identifyIntervalMs,
      handoffPollMs: opts.handoffPollMs ?? AGENT_DEFAULTS.handoffPollMs,
    })
    this.plans = new PlanManager({
      clock: this.clock,
      nodeId: this.nodeId,
      runner: this.runner,
      scheduler: this.scheduler,
      stopMarginMs: (leaseMs) => opts.stopMarginMs ?? Math.min(AGENT_DEFAULTS.maxStopMarginMs, Math.floor(leaseMs / 6)),
      startRetryMs: opts.startRetryMs ?? AGENT_DEFAULTS.startRetryMs,
      reportNow: () => this.checkInNow(),
      authorityLost: (reason: AuthorityLoss) => {
        if (reason !== 'shutdown') this.emit({ type: 'authority_lost', reason })
      },
    })
    this.checkinAlarm = new Alarm(this.clock, () => this.checkInNow())
  }

  /** Loads a bundle folder (key.pem, cert.pem, ca.pem, plan-jwks.json) and builds an agent from it. */
  static async fromBundle(dir: string, opts: Omit<NodeAgentOptions, 'identity'>): Promise<NodeAgent> {
    return new NodeAgent({ ...opts, identity: await loadBundle(dir) })
  }

  /** Reads the stored generation floor and starts checking in; resolves once the first check-in is sent. */
  async start(): Promise<void> {
    if (this.started) throw new Error('the agent was already started')
    this.started = true
    this.floor = await this.store.load()
    this.logger.info({ controllers: this.opts.controllers, capacity: this.opts.capacity, stored_generation: this.floor }, 'node agent starting')
    this.checkInNow()
  }

  /** Stops every shard (reason shutdown) and all activity; resolves once done. */
  async stop(): Promise<AgentEnd> {
    this.haltNow('shutdown', 'stopped by the host')
    return this.closed
  }

  /** Checks in now (or right after the check-in in flight). */
  checkInNow(): void {
    if (!this.started || this.halt !== null) return
    if (this.inFlight) {
      this.again = true
      return
    }
    this.inFlight = true
    this.checkinAlarm.cancel()
    void this.checkInOnce()
      .catch((err: unknown) => {
        this.logger.error({ err: describe(err) }, 'check-in failed unexpectedly')
        return this.retryDelay()
      })
      .then((delay) => {
        this.inFlight = false
        if (delay === null || this.halt !== null) return
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
    return {
      nodeId: this.nodeId,
      state: this.state(),
      acceptedGeneration: plan?.generation ?? null,
      reportedGeneration: this.plans.appliedGeneration,
      assigned: plan?.assigned ?? [],
      running: this.runner.inPhase('running'),
      starting: this.runner.inPhase('starting'),
      stopping: this.runner.inPhase('stopping'),
      failed: this.runner.inPhase('failed'),
      claiming: this.scheduler.pending.sort((a, b) => a - b),
      lastRenewalSentAt: toWall(this.lastSentAt),
      lastRenewalAckAt: toWall(this.lastAckAt),
      authorityEndsAt: toWall(this.plans.authorityDeadline),
      controller: this.client.currentUrl,
      lastError: this.lastError,
      halted: this.halt,
    }
  }

  private state(): AgentState {
    if (this.halt !== null) return 'halted'
    if (!this.started) return 'idle'
    if (this.plans.accepted === null) return 'joining'
    return this.plans.hasAuthority() ? 'active' : 'no_authority'
  }

  private emit(event: AgentEvent): void {
    logEvent(this.logger, event)
    try {
      this.opts.onEvent?.(event)
    } catch (err) {
      this.logger.error({ err: describe(err) }, 'onEvent threw')
    }
  }

  /** One check-in; returns the delay before the next one, or null when the agent halted. */
  private async checkInOnce(): Promise<number | null> {
    const sentAt = this.clock.now()
    this.budget.spend() // a check-in never waits for the budget, but counts against it
    let reply
    try {
      reply = await this.client.post('/v1/checkin', this.checkinBody())
    } catch (err) {
      return this.onRequestError(err)
    }
    if (reply.status === 200) return this.onCheckinAnswer(reply.body, reply.url, sentAt)
    if (reply.status === 403) {
      this.refuseCertificate(true, `${reply.url} answered 403 ${reply.errorCode ?? ''}`.trim())
      return null
    }
    this.fail(`check-in answered ${reply.status} ${reply.errorCode ?? ''}`.trim())
    return reply.status === 429 ? Math.max(reply.retryAfterMs ?? 1000, 100) : this.retryDelay()
  }

  private async onCheckinAnswer(body: unknown, url: string, sentAt: number): Promise<number | null> {
    const parsed = checkinReplySchema.safeParse(body)
    if (!parsed.success) {
      this.fail(`the check-in answer from ${url} is not the SPEC's shape`)
      return this.retryDelay()
    }
    const answer = parsed.data
    this.leaseMs = answer.lease_seconds * 1000
    const previous = this.plans.accepted
    const lastGeneration = maxOrNull(this.floor, previous?.generation ?? null)
    const clockSkewMs = this.opts.clockSkewMs ?? AGENT_DEFAULTS.clockSkewMs
    const verdict = await verifyPlanToken(answer.plan_jws, this.pinned, { nodeId: this.nodeId, nowMs: this.clock.wallNow(), lastGeneration, clockSkewMs })
    if (!verdict.ok) {
      this.emit({ type: 'plan_refused', reason: verdict.reason, detail: verdict.detail, controller: url })
      return this.interval()
    }
    const mismatch = plainFieldMismatch(answer, verdict.plan)
    if (mismatch !== null) {
      this.emit({ type: 'plan_refused', reason: 'plain_mismatch', detail: `the plain field ${mismatch} differs from the signed plan`, controller: url })
      return this.interval()
    }
    if (this.halt !== null) return null
    const plan = verdict.plan
    await this.raiseFloor(plan.generation)
    this.plans.accept(plan, sentAt)
    this.lastSentAt = sentAt
    this.lastAckAt = this.clock.now()
    this.failures = 0
    this.lastError = null
    const changed = previous === null || previous.generation !== plan.generation || previous.assigned.join() !== plan.assigned.join()
    this.emit({ type: 'plan_accepted', generation: plan.generation, assigned: plan.assigned, changed, controller: url })
    return this.interval()
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
    if (err.probableRefusal) {
      this.refuseCertificate(false, 'every controller closed the connection right after the TLS handshake without answering: the certificate is probably revoked or expired')
    }
    return this.retryDelay()
  }

  /** A definitive refusal halts the agent; a probable one stops the shards until a check-in succeeds again. */
  private refuseCertificate(definitive: boolean, detail: string): void {
    this.emit({ type: 'certificate_refused', definitive, detail })
    if (definitive) this.haltNow('certificate_refused', detail)
    else this.plans.loseAuthority('certificate_refused')
  }

  private haltNow(reason: HaltReason, detail: string): void {
    if (this.halt !== null) return
    this.halt = { reason, detail }
    this.checkinAlarm.cancel()
    this.scheduler.stop()
    this.plans.loseAuthority(reason)
    this.plans.close()
    void this.runner.stopAll(reason).then(() => {
      this.client.close()
      this.emit({ type: 'halted', reason, detail })
      this.resolveClosed(this.halt!)
    })
  }

  private fail(detail: string): void {
    this.lastError = detail
    this.emit({ type: 'checkin_failed', detail })
  }

  /** lease/3 with ±10 % jitter (10 s before the first answer). */
  private interval(): number {
    const base = (this.leaseMs ?? 30_000) / 3
    return Math.round(base * (0.9 + 0.2 * this.clock.random()))
  }

  /** Retries come quickly at first (failover already tried every URL), then back off up to the interval. */
  private retryDelay(): number {
    this.failures += 1
    return Math.min(this.interval(), Math.round(250 * 2 ** this.failures * (0.9 + 0.2 * this.clock.random())))
  }

  private checkinBody(): Record<string, unknown> {
    const health: ShardHealth = this.opts.health?.() ?? {
      ready_shards: this.runner.inPhase('running').length,
      starting_shards: this.runner.inPhase('starting').length + this.scheduler.pending.length,
      backoff_shards: 0,
      fatal_shards: this.runner.inPhase('failed').length,
    }
    const applied = this.plans.appliedGeneration
    return {
      node_id: this.nodeId,
      capacity: this.opts.capacity,
      ready_shards: clampCount(health.ready_shards),
      starting_shards: clampCount(health.starting_shards),
      backoff_shards: clampCount(health.backoff_shards),
      fatal_shards: clampCount(health.fatal_shards),
      ...(applied === null ? {} : { generation: applied }),
    }
  }

  private async claim(shardId: number): Promise<ClaimOutcome> {
    let reply
    try {
      reply = await this.client.post('/v1/identify', { node_id: this.nodeId, shard_id: shardId })
    } catch (err) {
      if (err instanceof CertificateRefusedError) this.refuseCertificate(true, err.message)
      return { kind: 'failed', detail: describe(err) }
    }
    if (reply.status === 429) return { kind: 'rate_limited', retryAfterMs: reply.retryAfterMs ?? 1000 }
    if (reply.status === 403 && reply.errorCode === 'not_owner') return { kind: 'not_owner' }
    if (reply.status !== 200) return { kind: 'failed', detail: `identify answered ${reply.status} ${reply.errorCode ?? ''}`.trim() }
    const parsed = identifyReplySchema.safeParse(reply.body)
    if (!parsed.success) return { kind: 'failed', detail: "the identify answer is not the SPEC's shape" }
    const answer = parsed.data
    if (answer.granted) return { kind: 'granted', generation: answer.generation }
    return { kind: 'wait', reason: answer.reason, retryAfterMs: answer.retry_after_ms }
  }

  private onClaimOutcome(shardId: number, outcome: ClaimOutcome): void {
    this.emit({ type: 'claim', shardId, outcome })
    // The controller's plan moved on: learn it now rather than at the next regular check-in.
    if (outcome.kind === 'not_owner') this.checkInNow()
  }
}

function clampCount(n: number): number {
  return Number.isInteger(n) ? Math.min(Math.max(n, 0), MAX_COUNT) : 0
}

function maxOrNull(a: number | null, b: number | null): number | null {
  if (a === null) return b
  if (b === null) return a
  return Math.max(a, b)
}

/** A short description of a thrown value (no stack). */
function describe(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 300)
}
