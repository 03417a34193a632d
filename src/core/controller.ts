/**
 * The controller state machine (SPEC "Controller state" to "Operator endpoints"): pure, with the clock
 * passed in as `now` (ms). The HTTP layer validates bodies and binds identities; the state store persists
 * takeDelta() whenever persistVersion moved (and, in the background, when pendingReports are waiting);
 * the audit log consumes drainEvents().
 *
 * Joins and capacity changes only mark the plan stale (`register`); `settle()` re-plans once for all the
 * check-ins that arrived together. Every other operation settles first, so it always sees a current plan.
 */
import { AppError } from '../errors.js'
import { assertCheckinAccepted } from './checkin-refusals.js'
import { restoredLimiter, restoreState, type RestoreHost } from './controller-restore.js'
import type { DurableState, StateDelta, StateMeta } from './durable-state.js'
import { durableSnapshot, stateLookups, stateMeta, type DurableParts } from './durable-view.js'
import { HandoffLedger } from './handoffs.js'
import { IdentifyLimiter } from './identify.js'
import { grantIdentify, handOutSession, type GrantDesk } from './identify-grants.js'
import { LivePlan } from './live-plan.js'
import { plannerFor } from './planners.js'
import { isValidName, nameProblem } from './names.js'
import { NO_NODE, NodeIndex } from './node-index.js'
import { newNodeRecord, renewRecord, type NodeRecord } from './node-record.js'
import { planView } from './plan-view.js'
import { effectiveSettings } from './live-reshard.js'
import type { NextSet } from './next-set.js'
import { Reshards, type ReshardHost } from './reshards.js'
import { LeaseHolders } from './lease-holders.js'
import { canonicalResumeUrl, DEFAULT_ALLOWED_RESUME_HOSTS } from './resume-url.js'
import { assertDepositAccepted } from './session-deposit.js'
import { DEFAULT_SESSION_TTL_SECONDS, SessionVault } from './session-vault.js'
import type { CheckinBody, IdentifyBody } from './schemas.js'
import { assertValidSettings } from './settings.js'
import { parseGuildId, shardForGuild } from './snowflake.js'
import { StateTracker } from './state-tracker.js'
import type { CertRef, CheckinOutcome, ControllerSettings, CoreEvent, DrainOutcome, IdentifyOutcome, PlanView, Registration, ReshardStarted, RouteOutcome } from './types.js'

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
  /** What the last steps of a claim work with (core/identify-grants.ts). */
  private readonly desk: GrantDesk
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
    const { sessions, tracker } = this
    this.desk = { limiter, sessions, tracker, get generation() { return self.gen }, emit: (event) => this.events.push(event), markDurable: () => this.markDurable() }
    if (restore !== undefined) {
      this.holders.revoked.restore(restore.state.meta.revoked ?? [], restore.now)
      const resharded = restoreState(this.restoreHost(), restore.state, restore.now)
      const holders = this.holders
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

  /** The whole answer of a check-in after settle(): the plan part and what registering did. */
  checkinOutcome(nodeId: string, registration: Registration): CheckinOutcome {
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
    }
  }

  /** The serial of the certificate a live node's record holds (its last accepted check-in's), or null. */
  certSerialOf(nodeId: string): string | null {
    return this.live.get(nodeId)?.certSerial ?? null
  }

  /**
   * Registers or renews a node (body already validated and bound to the certificate's CN). A join or a
   * capacity change only marks the plan stale; settle() re-plans once for all of them.
   */
  register(now: number, body: CheckinBody, cert: CertRef): Registration {
    this.expireStaleNodes(now)
    const existing = this.live.get(body.node_id)
    assertCheckinAccepted(existing, body, cert, this.gen)
    const deposit = body.sessions ?? []
    if (deposit.length > 0) {
      // Read before the check-in releases anything: a deposit must name handoffs this check-in releases.
      assertDepositAccepted(deposit, {
        nodeIndexId: existing === undefined ? undefined : this.nodes.find(body.node_id),
        reportedGeneration: body.generation,
        totalShards: this.settings.totalShards,
        handoffs: this.handoffs,
        allowedHosts: this.allowedResumeHosts,
        revokedUpTo: this.holders.revokedUpTo(body.node_id),
      })
    }
    const rotated = existing !== undefined && existing.certSerial !== cert.serial
    const record = existing ?? newNodeRecord(now, body, cert)
    this.nodes.idOf(record.nodeId) // every live node has an ID (see replan)
    if (existing === undefined) {
      this.livePlan.join(record.nodeId)
      this.reshards.join(record.nodeId)
    }
    const previousSerial = rotated ? record.certSerial : null
    if (existing === undefined || record.capacity !== body.capacity) this.stale = true
    const reportedBefore = record.reportedGeneration
    const changed = this.updateRecord(record, now, body, cert)
    if (rotated) this.events.push({ kind: 'node_rotated', nodeId: record.nodeId, fromSerial: previousSerial!, toSerial: cert.serial })
    this.holders.renew(record) // to the back of the lastSeen order: expiry looks at the head only
    if (changed.record || existing === undefined) this.touchNode(record.nodeId)
    else {
      if (changed.state) this.markDurable()
      if (record.reportedGeneration !== reportedBefore) this.tracker.report(record.nodeId) // written in the background: no answer waits for it
    }
    for (const entry of deposit) {
      // held as rebuilt from its parts: the next owner never sees the depositor's own spelling
      this.sessions.deposit(now, entry.shard_id, record.nodeId, { sessionId: entry.session_id, sequence: entry.sequence, resumeUrl: canonicalResumeUrl(entry.resume_url) })
      this.events.push({ kind: 'session_deposited', nodeId: record.nodeId, shardId: entry.shard_id, generation: this.gen })
    }
    this.reshards.afterCheckin(record.nodeId, body.next_ready_shards, body.generation, !this.stale)
    return { rotated, previousSerial }
  }

  /** Re-plans if check-ins made the plan stale. */
  settle(): void {
    if (this.stale) {
      this.replan()
      this.reshards.switchIfComplete()
    }
  }

  /**
   * Decides an Identify claim presented with the certificate `serial`: the certificate on record, ownership,
   * reshard, handoff; then a held session is handed out (a RESUME: no bucket slot, no daily budget) unless
   * the claim is `fresh`; else the daily budget, then the bucket.
   */
  claimIdentify(now: number, body: IdentifyBody, serial: string): IdentifyOutcome {
    this.prepare(now)
    const record = this.live.get(body.node_id)
    if (record !== undefined && record.certSerial !== serial) {
      // a superseded certificate, or a newer one that has not checked in: only the record's may act (and take sessions)
      throw new AppError('identity_conflict', `node ${body.node_id} is live with another certificate: claims are served to the certificate of its last accepted check-in (check in with this one first)`)
    }
    if (body.set === 'next' && !this.reshards.nextClaimIsCurrent()) {
      return this.reshards.claimNext(now, body, () => grantIdentify(this.desk, now, body.node_id, body.shard_id, 'next'))
    }
    const shardId = body.shard_id
    if (shardId >= this.settings.totalShards) {
      throw new AppError('invalid_request', `shard_id must be below total_shards (${this.settings.totalShards})`)
    }
    if (this.ownerOf(shardId) !== body.node_id) {
      throw new AppError('not_owner', `shard ${shardId} is not assigned to ${body.node_id} in generation ${this.gen}`)
    }
    const barrierWaitMs = this.reshards.barrierWaitMs(now)
    if (barrierWaitMs !== null) return { granted: false, reason: 'handoff_pending', retryAfterMs: barrierWaitMs }
    const handoffWaitMs = this.handoffs.waitMs(shardId, (nodeId) => this.holders.leaseFrom(nodeId), this.leaseMs, now)
    if (handoffWaitMs !== null) return { granted: false, reason: 'handoff_pending', retryAfterMs: handoffWaitMs }
    return handOutSession(this.desk, now, body.node_id, shardId, body.fresh === true) ?? grantIdentify(this.desk, now, body.node_id, shardId, 'current')
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
    return planView({ generation: this.gen, settings, plan: this.livePlan, live, draining, handoffs, nodes, limiter, reshards }, now)
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

  /** Grants left in the rolling daily Identify budget at `now`, or null without a budget. */
  dailyBudgetRemaining(now: number): number | null {
    return this.limiter.remaining(now)
  }

  /**
   * Sets or clears a node's drain flag (kept while the node is not live) and re-plans. A drain that would
   * leave more shards without a node (the other live nodes lack the capacity) is refused with 409
   * `insufficient_capacity` and changes nothing, unless `force`.
   */
  setDraining(now: number, nodeId: string, draining: boolean, force = false): DrainOutcome {
    this.prepare(now)
    if (!isValidName(nodeId)) throw new AppError('invalid_request', `node_id ${nameProblem(nodeId) ?? 'is invalid'}`)
    if (draining !== this.draining.has(nodeId)) {
      if (draining) this.draining.add(nodeId)
      else this.draining.delete(nodeId)
      if (draining && !force && this.live.has(nodeId)) this.assertDrainLeavesNoneStranded(nodeId)
      this.tracker.drain(nodeId)
      this.markDurable()
      if (this.live.has(nodeId)) this.replan()
    }
    return { nodeId, draining, generation: this.gen, live: this.live.has(nodeId), unassigned: this.livePlan.unassigned }
  }

  /** With `nodeId` flagged already: throws (and takes the flag back) if the plan would strand more shards. */
  private assertDrainLeavesNoneStranded(nodeId: string): void {
    const stranded = this.settings.totalShards - this.livePlan.compute().assigned - this.livePlan.unassigned
    if (stranded <= 0) return
    this.draining.delete(nodeId)
    throw new AppError(
      'insufficient_capacity',
      `draining ${nodeId} would leave ${stranded} more ${stranded === 1 ? 'shard' : 'shards'} without a node (${this.livePlan.unassigned + stranded} in all): ` +
        'the other live nodes lack the capacity; add capacity first, or drain with "force": true',
      { unassigned: this.livePlan.unassigned + stranded },
    )
  }

  /**
   * Removes at once every live node whose certificate serial is revoked; returns their IDs. A revoked node
   * may be cut off and still running its shards, so they move now but their handoffs wait for its lease.
   */
  removeRevoked(now: number, isRevoked: (serial: string) => boolean): string[] {
    this.prepare(now)
    const removed = [...this.live.values()].filter((record) => isRevoked(record.certSerial))
    const holders = removed.map((record) => {
      // what a revoked node deposited is no longer vouched for: its shards' next owners Identify
      this.sessions.discardFrom(record.nodeId)
      const holder = this.holders.revoked.add(record)
      this.dropNode(record, true)
      this.events.push({ kind: 'node_removed', nodeId: record.nodeId, serial: record.certSerial, reason: 'revoked' })
      return holder
    })
    this.settle()
    for (const holder of holders) holder.generation = this.gen // the plan that took its shards (the handoffs at or below it)
    if (holders.length > 0) this.markDurable()
    return removed.map((record) => record.nodeId)
  }

  /** Expires nodes with now - lastSeen > lease and re-plans; O(1) when none is due (core/lease-holders.ts). */
  expireStaleNodes(now: number): string[] {
    if (this.holders.revoked.size > 0) this.releaseRevokedHolders(now)
    const expired = this.holders.takeExpired(now)
    for (const record of expired) {
      this.dropNode(record, false)
      this.events.push({ kind: 'node_expired', nodeId: record.nodeId, lastSeen: record.lastSeen })
    }
    if (expired.length > 0) this.replan()
    return expired.map((record) => record.nodeId)
  }

  /** Revoked nodes whose lease ran out have stopped everything: what waited for them is released. */
  private releaseRevokedHolders(now: number): void {
    const due = this.holders.revoked.takeDue(now, this.leaseMs)
    for (const holder of due) {
      const id = this.nodes.find(holder.nodeId)
      const live = this.live.has(holder.nodeId)
      if (id !== undefined) this.handoffs.releaseAcknowledged(id, holder.generation)
      this.reshards.releaseRevoked(holder.nodeId, id ?? NO_NODE, holder.generation, live)
      if (id !== undefined && !live) this.nodes.release(holder.nodeId) // no table refers to it any more
    }
    if (due.length > 0) this.markDurable()
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
    const { reshard, liveReshard, retired } = this.reshards.meta()
    const meta = stateMeta(this.settings, this.gen, this.livePlan.fingerprint, reshard, this.highestCrlNumber)
    const configured = this.configuredTotalShards === this.settings.totalShards ? undefined : this.configuredTotalShards
    const revoked = this.holders.revoked.size === 0 ? undefined : this.holders.revoked.persisted()
    if (liveReshard === undefined && configured === undefined && retired === undefined && revoked === undefined) return meta // the common case: written exactly as before
    return {
      ...meta,
      ...(liveReshard === undefined ? {} : { liveReshard }),
      ...(configured === undefined ? {} : { configuredTotalShards: configured }),
      ...(retired === undefined ? {} : { retired }),
      ...(revoked === undefined ? {} : { revoked }),
    }
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

  private touchNode(nodeId: string): void {
    this.tracker.node(nodeId)
    this.markDurable()
  }

  /**
   * Applies a check-in to a record. `record`: a persisted field of the record changed (capacity,
   * certificate) and it is written with the answer; `state`: the check-in released handoffs or
   * acknowledged a reshard, changes of their own (handoff runs, the meta) that the answer waits for.
   * A new reported generation is neither: register() marks it as a report (state-tracker.ts), also when
   * it released something: a release is justified by the report the leader read, never by a stored one
   * (the restore reads no reported generation), so the record need not go with it.
   */
  private updateRecord(record: NodeRecord, now: number, body: CheckinBody, cert: CertRef): { record: boolean; state: boolean } {
    const changed = renewRecord(record, now, body, cert)
    let state = false
    if (body.generation !== undefined) {
      record.reportedGeneration = body.generation
      const id = this.nodes.idOf(record.nodeId)
      const revokedUpTo = this.holders.revokedUpTo(record.nodeId)
      if (this.handoffs.releaseAcknowledged(id, body.generation, revokedUpTo) > 0) state = true
      if (this.reshards.acknowledge(record.nodeId, id, body.generation, revokedUpTo)) state = true
    }
    return { record: changed, state }
  }

  /**
   * Takes a node out of the live set. Expired: it stopped everything, so whatever it had to hand off is
   * released with it. Revoked: that waits for its lease (releaseRevokedHolders).
   */
  private dropNode(record: NodeRecord, revoked: boolean): void {
    this.holders.unlink(record)
    const id = this.nodes.idOf(record.nodeId)
    const revokedUpTo = revoked ? undefined : this.holders.revokedUpTo(record.nodeId)
    if (!revoked) this.handoffs.releaseAcknowledged(id, Infinity, revokedUpTo)
    this.reshards.drop(record.nodeId, id, revoked, revokedUpTo)
    this.livePlan.leave(record.nodeId)
    this.touchNode(record.nodeId)
    this.stale = true
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
