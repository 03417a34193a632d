/**
 * The controller state machine (SPEC "Controller state" to "Operator endpoints"): pure, with the clock
 * passed in as `now` (ms). The HTTP layer validates bodies and binds identities; the state store persists
 * takeDelta() whenever persistVersion moved (and, in the background, when pendingReports are waiting);
 * the audit log consumes drainEvents().
 *
 * Joins and capacity changes only mark the plan stale (`register`); `settle()` re-plans once for all the
 * check-ins that arrived together. Every other operation settles first, so it always sees a current plan.
 * The decisions live beside it: who joins, leaves and drains (membership.ts), claims (claims.ts), live
 * reshards (reshards.ts); this class owns the parts they share, the re-plan and the generation.
 */
import { restoredLimiter, restoreState, type RestoreHost } from './controller-restore.js'
import type { DurableState, StateDelta, StateMeta } from './durable-state.js'
import { durableSnapshot, stateLookups, stateMeta, type DurableParts } from './durable-view.js'
import { decideClaim, type ClaimDesk } from './claims.js'
import { HandoffLedger } from './handoffs.js'
import { IdentifyLimiter } from './identify.js'
import { LivePlan } from './live-plan.js'
import { Membership, type MembershipHost } from './membership.js'
import { plannerFor } from './planners.js'
import { NO_NODE, NodeIndex } from './node-index.js'
import type { NodeRecord } from './node-record.js'
import { planView } from './plan-view.js'
import { effectiveSettings } from './live-reshard.js'
import type { NextSet } from './next-set.js'
import { Reshards, type ReshardHost } from './reshards.js'
import { RestBudget } from './rest-budget.js'
import { LeaseHolders } from './lease-holders.js'
import { DEFAULT_ALLOWED_RESUME_HOSTS } from './resume-url.js'
import { DEFAULT_SESSION_TTL_SECONDS, SessionVault } from './session-vault.js'
import type { CheckinBody, IdentifyBody } from './schemas.js'
import { assertValidSettings } from './settings.js'
import { parseGuildId, shardForGuild } from './snowflake.js'
import { StateTracker } from './state-tracker.js'
import type { CertRef, CheckinOutcome, RestBudgetView, ControllerSettings, CoreEvent, DrainOutcome, IdentifyOutcome, PlanView, Registration, ReshardStarted, RouteOutcome } from './types.js'

export type { Registration } from './types.js'

const NO_EVENTS: readonly CoreEvent[] = Object.freeze([])

/** The decision core: node map, plan, generation, handoffs and Identify pacing. */
export class Controller {
  private readonly leaseMs: number
  /** The live nodes (in lastSeen order) and the revoked ones inside their lease. */
  private readonly holders: LeaseHolders
  /** `holders.live`: read everywhere. */
  private readonly live: ReadonlyMap<string, NodeRecord>
  private readonly draining = new Set<string>()
  private readonly nodes = new NodeIndex()
  private readonly tracker = new StateTracker()
  private handoffs: HandoffLedger
  private readonly limiter: IdentifyLimiter
  /** Sessions deposited for the shards' next owners: memory only, never part of `durable`. */
  private readonly sessions: SessionVault
  private readonly allowedResumeHosts: readonly string[]
  /** The plan, kept in byte order of node IDs between re-plans (see core/live-plan.ts); replaced by a reshard's switch. */
  private livePlan: LivePlan
  /** The settings in force: the configured ones, with total_shards as a live reshard switched it. */
  private settings: ControllerSettings
  /** The configuration's total_shards (differs from settings.totalShards after a live reshard's switch). */
  private readonly configuredTotalShards: number
  /** A live reshard's next set, the restart barrier and what a finished reshard retired (core/reshards.ts). */
  private readonly reshards: Reshards
  /** What a claim works with (core/claims.ts). */
  private readonly desk: ClaimDesk
  /** Joins, renewals and departures (core/membership.ts). */
  private readonly members: Membership
  /** The REST budget's shares (SPEC "REST budget"), or null when the configuration has none. Memory only. */
  private readonly rest: RestBudget | null
  /** The parts above that hold durable state, as snapshot() and takeDelta() read them. */
  private readonly durable: DurableParts
  private gen = 0
  private stale = false
  private replanCount = 0
  /** The highest CRL number installed so far (carried for the runtime and persisted; never decided on here). */
  private highestCrlNumber: bigint | null = null
  private version = 0
  private events: CoreEvent[] = []

  /** A fresh controller, or one restored from a state saved before a restart at `restore.now`. */
  constructor(
    configured: ControllerSettings,
    restore?: { state: DurableState; now: number },
  ) {
    assertValidSettings(configured)
    this.configuredTotalShards = configured.totalShards
    const settings = effectiveSettings(configured, restore?.state.meta)
    this.settings = settings
    this.leaseMs = settings.leaseSeconds * 1000
    this.holders = new LeaseHolders(this.leaseMs)
    this.live = this.holders.live
    this.sessions = new SessionVault((settings.sessionHandoff?.ttlSeconds ?? DEFAULT_SESSION_TTL_SECONDS) * 1000)
    this.allowedResumeHosts = settings.sessionHandoff?.allowedHosts ?? DEFAULT_ALLOWED_RESUME_HOSTS
    this.livePlan = this.ownPlan(new LivePlan(settings.totalShards, this.nodes, this.live, this.draining, plannerFor(settings.planner), settings.planner === 'stable'))
    this.handoffs = new HandoffLedger(settings.totalShards, this.nodes, (first, count) => this.tracker.handoffs(first, count))
    this.limiter =
      restore === undefined
        ? new IdentifyLimiter(settings.maxConcurrency, settings.identifyIntervalMs, settings.dailyIdentifyLimit)
        : restoredLimiter(settings, restore.state, restore.now)
    const self = this
    const { live, draining, nodes, limiter } = this
    // getters: a reshard's switch replaces the plan and the handoff ledger
    this.durable = { live, draining, nodes, limiter, get plan() { return self.livePlan }, get handoffs() { return self.handoffs } }
    this.reshards = new Reshards(this.reshardHost())
    const { sessions, tracker, holders, reshards, leaseMs } = this
    this.desk = {
      limiter, sessions, tracker, holders, reshards, leaseMs,
      get generation() { return self.gen },
      get handoffs() { return self.handoffs },
      get totalShards() { return self.settings.totalShards },
      emit: (event) => this.events.push(event),
      markDurable: () => this.markDurable(),
      ownerOf: (shardId) => this.ownerOf(shardId),
    }
    this.members = new Membership(this.membershipHost())
    this.rest = settings.rest === undefined ? null : new RestBudget(settings.rest, { live, draining })
    if (restore !== undefined) {
      this.rest?.restored(restore.now, this.leaseMs)
      this.holders.revoked.restore(restore.state.meta.revoked ?? [], restore.now)
      const resharded = restoreState(this.restoreHost(), restore.state, restore.now)
      this.reshards.restore(restore.state.meta, resharded, { mayRunShards: (nodeId) => holders.mayRunShards(nodeId), isRevoked: (nodeId) => holders.revoked.has(nodeId) })
    }
  }

  /** The shard count in force (the configured one, or what a live reshard switched to). */
  get totalShards(): number {
    return this.settings.totalShards
  }

  /** The current plan generation (of the settled plan). */
  get generation(): number {
    return this.gen
  }

  /**
   * Moves whenever the durable state changed (health counts and reported generations aside: see
   * pendingReports); settle() may move it too.
   */
  get persistVersion(): number {
    return this.version
  }

  /** How many times the plan was recomputed (for tests and metrics: a steady check-in must not re-plan). */
  get replans(): number {
    return this.replanCount
  }

  /** True while check-ins wait for a re-plan (see settle). */
  get needsSettle(): boolean {
    return this.stale
  }

  /** The highest CRL number recorded (restored from the state or by recordCrlNumber), or null. */
  get crlNumber(): bigint | null {
    return this.highestCrlNumber
  }

  /** Records an installed CRL's number; only a higher one changes (and so persists) anything. */
  recordCrlNumber(crlNumber: bigint): void {
    if (this.highestCrlNumber !== null && crlNumber <= this.highestCrlNumber) return
    this.highestCrlNumber = crlNumber
    this.markDurable()
  }

  /** Returns and clears the events accumulated since the last call. */
  drainEvents(): readonly CoreEvent[] {
    if (this.events.length === 0) return NO_EVENTS // the steady check-in: nothing to allocate
    const events = this.events
    this.events = []
    return events
  }

  /**
   * The whole answer of a check-in after settle(): the plan part, what registering did and, with a REST
   * budget, the node's share from `now` (the answer is sent as it is computed: see service/durable-writer.ts).
   */
  checkinOutcome(nodeId: string, registration: Registration, now: number): CheckinOutcome {
    // One literal, no spreads: this runs on every check-in.
    const range = this.livePlan.rangeOf(nodeId)
    const { totalShards, leaseSeconds, maxConcurrency } = this.settings
    return {
      generation: this.gen,
      totalShards,
      leaseSeconds,
      maxConcurrency,
      rangeStart: range.rangeStart,
      rangeCount: range.rangeCount,
      rotated: registration.rotated,
      previousSerial: registration.previousSerial,
      next: this.reshards.nextRangeOf(nodeId),
      rest: this.rest === null || registration.reportsRest !== true ? null : this.restShare(now, nodeId),
    }
  }

  /** A node's REST share in force until its lease ends; a node that is not live (it left) gets none. */
  private restShare(now: number, nodeId: string): CheckinOutcome['rest'] {
    const record = this.live.get(nodeId)
    const share = this.rest!.shareFor(now, nodeId, record === undefined ? now : record.lastSeen + this.leaseMs)
    return { perSecond: share.centiPerSecond / 100, invalidBudget: share.invalidBudget, untilMs: share.untilMs }
  }

  /** The serial of the certificate a live node's record holds (its last accepted check-in's), or null. */
  certSerialOf(nodeId: string): string | null {
    return this.live.get(nodeId)?.certSerial ?? null
  }

  /** Registers or renews a node (core/membership.ts); settle() re-plans for joins and capacity changes. */
  register(now: number, body: CheckinBody, cert: CertRef): Registration {
    const registration = this.members.checkin(now, body, cert)
    if (this.rest === null) return registration
    // After the check-in was accepted: a refused one (a superseded certificate, say) reports nothing. Only
    // a node that reports demand takes part: one without a REST proxy (or an agent older than the budget,
    // which refuses a plan with a claim it does not know) is answered no share and holds none.
    if (body.leaving === true || body.rest_demand === undefined) this.rest.withdraw(body.node_id)
    else this.rest.report(now, body.node_id, body.rest_demand)
    return body.rest_demand === undefined ? registration : { ...registration, reportsRest: true }
  }

  /** Re-plans if check-ins made the plan stale. */
  settle(): void {
    if (this.stale) {
      this.replan()
      this.reshards.switchIfComplete()
    }
  }

  /** Decides an Identify claim presented with the certificate `serial` (core/claims.ts). */
  claimIdentify(now: number, body: IdentifyBody, serial: string): IdentifyOutcome {
    this.prepare(now)
    return decideClaim(this.desk, now, body, serial)
  }

  /** Starts a live reshard to `totalShards` (SPEC "Live resharding"; refusals in core/reshards.ts). */
  startReshard(now: number, totalShards: number): ReshardStarted {
    this.prepare(now)
    return this.reshards.start(now, totalShards, this.limiter.remaining(now))
  }

  /** Aborts the live reshard: its next set is dropped under a new generation (nodes stop its shards). */
  abortReshard(now: number): ReshardStarted {
    this.prepare(now)
    return this.reshards.abort()
  }

  /**
   * The answer of an Identify grant in `bucket` was released to the node (or failed) at `now`: the
   * bucket's interval counts from this moment (see IdentifyLimiter).
   */
  identifyReleased(now: number, bucket: number): void {
    this.limiter.released(now, bucket)
  }

  /** Which node serves a guild (raw decimal snowflake, echoed back as given). */
  route(now: number, guildId: string): RouteOutcome {
    this.prepare(now)
    const shardId = shardForGuild(parseGuildId(guildId), this.settings.totalShards)
    return { guildId, shardId, nodeId: this.ownerOf(shardId), generation: this.gen }
  }

  /** The operator's view of the plan, nodes in byte order. */
  plan(now: number): PlanView {
    this.prepare(now)
    const { settings, live, draining, handoffs, nodes, limiter, reshards } = this
    return planView({ generation: this.gen, settings, plan: this.livePlan, live, draining, handoffs, nodes, limiter, reshards, recentLeaves: this.members.recentLeaves(now), rest: this.rest }, now)
  }

  /** Live and draining node counts, and unassigned shards (for metrics; after settle()). */
  counts(): { readonly live: number; readonly draining: number; readonly unassigned: number } {
    let draining = 0
    for (const nodeId of this.live.keys()) if (this.draining.has(nodeId)) draining += 1
    return { live: this.live.size, draining, unassigned: this.livePlan.unassigned }
  }

  /** Deposited sessions held at `now` (for the pxe_sessions_held gauge; their values never leave the core but by a claim). */
  sessionsHeld(now: number): number {
    return this.sessions.size(now)
  }

  /** The REST budget as a whole at `now` (metrics), or null when the configuration has none. */
  restBudget(now: number): RestBudgetView | null {
    return this.rest === null ? null : this.rest.view(now)
  }

  /** Grants left in the rolling daily Identify budget at `now`, or null without a budget. */
  dailyBudgetRemaining(now: number): number | null {
    return this.limiter.remaining(now)
  }

  /** Sets or clears a node's drain flag and re-plans (core/membership.ts: a drain that strands shards is refused unless `force`). */
  setDraining(now: number, nodeId: string, draining: boolean, force = false): DrainOutcome {
    this.prepare(now)
    return this.members.setDraining(nodeId, draining, force)
  }

  /** Removes at once every live node whose certificate serial is revoked (core/membership.ts); returns their IDs. */
  removeRevoked(now: number, isRevoked: (serial: string) => boolean): string[] {
    this.prepare(now)
    return this.members.removeRevoked(isRevoked)
  }

  /** Expires nodes with now - lastSeen > lease and re-plans; O(1) when none is due. */
  expireStaleNodes(now: number): string[] {
    return this.members.expire(now)
  }

  /** The node that owns a shard in the current plan, or null. */
  ownerOf(shardId: number): string | null {
    return this.nodes.nameOf(this.livePlan.owners[shardId] ?? NO_NODE)
  }

  /** The whole durable state (a first write, a compaction). O(N + S). */
  snapshot(): DurableState {
    return durableSnapshot(this.durable, this.meta())
  }

  /**
   * What changed in the durable state since the last call (settle() first); of the reports (records
   * changed in their reported generation only), at most `reportLimit`, the oldest first.
   */
  takeDelta(reportLimit = Number.POSITIVE_INFINITY): StateDelta {
    return this.tracker.take(this.meta(), stateLookups(this.durable), reportLimit)
  }

  /** Records changed in their reported generation only, not yet taken: durable changes no answer waits for. */
  get pendingReports(): number {
    return this.tracker.pendingReports
  }

  private meta(): StateMeta {
    const revoked = this.holders.revoked.size === 0 ? undefined : this.holders.revoked.persisted()
    return stateMeta(this.settings, this.gen, this.livePlan.fingerprint, this.reshards.meta(), this.highestCrlNumber, this.configuredTotalShards, revoked)
  }

  /** Every operation but a check-in starts with expired leases gone and a current plan. */
  private prepare(now: number): void {
    this.expireStaleNodes(now)
    this.settle()
  }

  /** Every change of the durable state moves persistVersion (the store writes takeDelta() when it moved). */
  private markDurable(): void {
    this.version += 1
  }

  /** Recomputes the plan; bumps the generation and records handoffs only if a shard changed owner. */
  private replan(): void {
    this.stale = false
    this.replanCount += 1
    const next = this.livePlan.next()
    const revokedIds = this.holders.revoked.size === 0 ? [] : this.holders.revokedIds(this.nodes)
    // A live reshard's next set is re-planned over the same membership change, before the current plan
    // adopts (which frees the IDs of nodes that left, that the next set's order still holds).
    let moved = this.reshards.replan(this.gen + 1, revokedIds)
    if (next.rangesChanged) this.markDurable()
    // The stable planner plans from the current ranges, so they are persisted with the node records.
    if (next.rangesChanged && this.settings.planner === 'stable') for (const nodeId of this.livePlan.changedNodes(next)) this.tracker.node(nodeId)
    // The generation a move is recorded at is the one this re-plan moves to.
    if (this.handoffs.recordMoves(this.livePlan.owners, next.owners, this.livePlan.ids, this.gen + 1, revokedIds)) moved = true
    if (moved) this.advanceGeneration()
    this.livePlan.adopt(next)
  }

  /** Moves to the next generation; returns it. */
  private advanceGeneration(): number {
    this.gen += 1
    this.events.push({ kind: 'generation_changed', from: this.gen - 1, to: this.gen })
    return this.gen
  }

  /** A plan of this controller's: the IDs of revoked holders stay while their handoffs may name them. */
  private ownPlan(plan: LivePlan): LivePlan {
    plan.retainsId = (nodeId) => this.holders.revoked.has(nodeId)
    return plan
  }

  /**
   * A live reshard's switch: total_shards becomes N and the next set the plan. Held sessions and old-set
   * handoffs belong to the old shard numbers and are dropped (core/reshards.ts retires the old set).
   */
  private adoptNextSet(next: NextSet): void {
    const from = this.settings.totalShards
    this.tracker.handoffs(0, Math.max(from, next.totalShards)) // every saved old-set handoff is deleted
    this.settings = { ...this.settings, totalShards: next.totalShards }
    this.livePlan = this.ownPlan(next.plan)
    this.livePlan.releasesIds = true
    this.handoffs = new HandoffLedger(next.totalShards, this.nodes, (first, count) => this.tracker.handoffs(first, count))
    this.sessions.clear()
    if (this.settings.planner === 'stable') for (const nodeId of this.live.keys()) this.tracker.node(nodeId) // their stored ranges change
  }

  /** The parts and steps core/reshards.ts works with. */
  private reshardHost(): ReshardHost {
    const self = this
    const { nodes, live, draining, leaseMs } = this
    return {
      nodes, live, draining, leaseMs,
      get settings() { return self.settings },
      get generation() { return self.gen },
      advanceGeneration: () => this.advanceGeneration(),
      emit: (event) => this.events.push(event),
      markDurable: () => this.markDurable(),
      leaseFrom: (nodeId) => this.holders.leaseFrom(nodeId),
      revokedNames: () => this.holders.revoked.names(),
      adoptNextSet: (next) => this.adoptNextSet(next),
    }
  }

  /** The parts and steps core/membership.ts works with. */
  private membershipHost(): MembershipHost {
    const self = this
    const { holders, nodes, sessions, tracker, reshards, allowedResumeHosts, leaseMs, draining } = this
    return {
      holders, nodes, sessions, tracker, reshards, allowedResumeHosts, leaseMs, draining,
      get handoffs() { return self.handoffs },
      get plan() { return self.livePlan },
      get totalShards() { return self.settings.totalShards },
      get generation() { return self.gen },
      get stale() { return self.stale },
      set stale(value) { self.stale = value },
      emit: (event) => this.events.push(event),
      markDurable: () => this.markDurable(),
      replan: () => this.replan(),
      settle: () => this.settle(),
      ownerOf: (shardId) => this.ownerOf(shardId),
    }
  }

  /** The parts and steps a restore works with (see core/controller-restore.ts). */
  private restoreHost(): RestoreHost {
    const self = this
    const { settings, draining, nodes, livePlan: plan, handoffs, tracker } = this
    return {
      settings, live: this.holders.live, draining, nodes, plan, handoffs, tracker,
      get generation() { return self.gen },
      resume: (generation, crlNumber) => void ((this.gen = generation), (this.highestCrlNumber = crlNumber)),
      replan: () => this.replan(),
      forgetChanges: () => void this.takeDelta(),
      startBarrier: (barrier) => this.reshards.startBarrier(barrier),
      settleReshard: () => void this.reshards.settleBarrier(),
      emit: (event) => this.events.push(event),
      markDurable: () => this.markDurable(),
      mayRunShards: (nodeId) => this.holders.mayRunShards(nodeId),
      revokedNames: () => [...this.holders.revoked.names()],
    }
  }
}
