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
import { DAILY_WINDOW_MS, IdentifyLimiter } from './identify.js'
import { LivePlan } from './live-plan.js'
import { compareBytes } from './planner.js'
import { plannerFor } from './planners.js'
import { isValidName, nameProblem } from './names.js'
import { NO_NODE, NodeIndex } from './node-index.js'
import { newNodeRecord, planNodeView, renewRecord, type NodeRecord } from './node-record.js'
import { reshardWaitMs, type ReshardBarrier } from './reshard.js'
import { NextSet } from './next-set.js'
import { assertReshardAllowed, effectiveSettings, persistedLiveReshard, restoreLiveReshard } from './live-reshard.js'
import { canonicalResumeUrl, DEFAULT_ALLOWED_RESUME_HOSTS } from './resume-url.js'
import { assertDepositAccepted } from './session-deposit.js'
import { DEFAULT_SESSION_TTL_SECONDS, SessionVault } from './session-vault.js'
import type { CheckinBody, IdentifyBody } from './schemas.js'
import { assertValidSettings } from './settings.js'
import { parseGuildId, shardForGuild } from './snowflake.js'
import { StateTracker } from './state-tracker.js'
import type { CertRef, CheckinOutcome, ControllerSettings, CoreEvent, DrainOutcome, IdentifyOutcome, NextRange, PlanView, Registration, ReshardStarted, ReshardView, RouteOutcome } from './types.js'

export type { Registration } from './types.js'

const NO_EVENTS: readonly CoreEvent[] = Object.freeze([])

/** The decision core: node map, plan, generation, handoffs and Identify pacing. */
export class Controller {
  private readonly leaseMs: number
  /** Live nodes, re-inserted on every check-in: iteration order is lastSeen order, oldest first. */
  private readonly live = new Map<string, NodeRecord>()
  /**
   * The first record of `live` when expireStaleNodes last read it, while it still is (null: read again).
   * Only a deletion can change a non-empty Map's head (insertions go to the end): unlinkLive clears this.
   */
  private expiryHead: NodeRecord | null = null
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
  /** A live reshard's next set, or null (SPEC "Live resharding"). */
  private next: NextSet | null = null
  /** How the last live reshard ended in this process: a late next-set claim after a switch is a current-set one. */
  private lastReshardEnd: { readonly outcome: 'switched' | 'aborted'; readonly totalShards: number } | null = null
  /** The parts above that hold durable state, as snapshot() and takeDelta() read them. */
  private readonly durable: DurableParts
  private gen = 0
  private stale = false
  private replanCount = 0
  /** Set after a restart with another plan (total_shards, planner), until every restored node applied it. */
  private reshard: ReshardBarrier | null = null
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
    this.sessions = new SessionVault((settings.sessionHandoff?.ttlSeconds ?? DEFAULT_SESSION_TTL_SECONDS) * 1000)
    this.allowedResumeHosts = settings.sessionHandoff?.allowedHosts ?? DEFAULT_ALLOWED_RESUME_HOSTS
    this.livePlan = new LivePlan(settings.totalShards, this.nodes, this.live, this.draining, plannerFor(settings.planner), settings.planner === 'stable')
    this.handoffs = new HandoffLedger(settings.totalShards, this.nodes, (first, count) => this.tracker.handoffs(first, count))
    this.limiter =
      restore === undefined
        ? new IdentifyLimiter(settings.maxConcurrency, settings.identifyIntervalMs, settings.dailyIdentifyLimit)
        : restoredLimiter(settings, restore.state, restore.now)
    const self = this
    const { live, draining, nodes, limiter } = this
    // getters: a reshard's switch replaces the plan and the handoff ledger
    this.durable = { live, draining, nodes, limiter, get plan() { return self.livePlan }, get handoffs() { return self.handoffs } }
    if (restore !== undefined) {
      const resharded = restoreState(this.restoreHost(), restore.state, restore.now)
      const liveReshard = restore.state.meta.liveReshard
      if (liveReshard !== undefined) {
        if (resharded) {
          // another configuration supersedes the live reshard: its next set is dropped, nodes stop it
          this.events.push({ kind: 'reshard_aborted', fromTotalShards: liveReshard.fromTotalShards, toTotalShards: liveReshard.toTotalShards, generation: this.gen, reason: 'restart' })
          this.markDurable()
        } else {
          this.next = this.newNextSet(liveReshard.toTotalShards, liveReshard.fromTotalShards, liveReshard.startedAt)
          restoreLiveReshard(this.next, liveReshard, this.live, this.nodes, this.gen)
        }
      }
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
      next: this.next === null ? null : this.nextRangeOf(nodeId, this.next),
    }
  }

  private nextRangeOf(nodeId: string, next: NextSet): NextRange {
    const range = next.rangeOf(nodeId)
    return { totalShards: next.totalShards, rangeStart: range.rangeStart, rangeCount: range.rangeCount }
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
      })
    }
    const rotated = existing !== undefined && existing.certSerial !== cert.serial
    const record = existing ?? newNodeRecord(now, body, cert)
    this.nodes.idOf(record.nodeId) // every live node has an ID (see replan)
    if (existing === undefined) {
      this.livePlan.join(record.nodeId)
      this.next?.plan.join(record.nodeId)
    }
    const previousSerial = rotated ? record.certSerial : null
    if (existing === undefined || record.capacity !== body.capacity) this.stale = true
    const reportedBefore = record.reportedGeneration
    const changed = this.updateRecord(record, now, body, cert)
    if (rotated) this.events.push({ kind: 'node_rotated', nodeId: record.nodeId, fromSerial: previousSerial!, toSerial: cert.serial })
    // Delete and re-insert so that the Map stays in lastSeen order (expiry looks at the head only).
    this.unlinkLive(record)
    this.live.set(record.nodeId, record)
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
    if (this.next !== null) {
      this.next.report(record.nodeId, body.next_ready_shards, body.generation)
      if (!this.stale) this.switchIfComplete()
    }
    return { rotated, previousSerial }
  }

  /** Re-plans if check-ins made the plan stale. */
  settle(): void {
    if (this.stale) {
      this.replan()
      this.switchIfComplete()
    }
  }

  /**
   * Decides an Identify claim: ownership, reshard, handoff; then a held session is handed out (a RESUME:
   * no bucket slot, no daily budget) unless the claim is `fresh`; else the daily budget, then the bucket.
   */
  claimIdentify(now: number, body: IdentifyBody): IdentifyOutcome {
    this.prepare(now)
    if (body.set === 'next' && !this.nextClaimIsCurrent()) return this.claimNext(now, body)
    const shardId = body.shard_id
    if (shardId >= this.settings.totalShards) {
      throw new AppError('invalid_request', `shard_id must be below total_shards (${this.settings.totalShards})`)
    }
    if (this.ownerOf(shardId) !== body.node_id) {
      throw new AppError('not_owner', `shard ${shardId} is not assigned to ${body.node_id} in generation ${this.gen}`)
    }
    if (this.reshard !== null) return { granted: false, reason: 'handoff_pending', retryAfterMs: reshardWaitMs(this.reshard, this.live, this.leaseMs, now) }
    const handoffWaitMs = this.handoffs.waitMs(shardId, this.live, this.leaseMs, now)
    if (handoffWaitMs !== null) return { granted: false, reason: 'handoff_pending', retryAfterMs: handoffWaitMs }
    if (body.fresh === true) this.sessions.discard(shardId)
    else {
      const session = this.sessions.take(now, shardId)
      if (session !== null) {
        this.events.push({ kind: 'session_handed', nodeId: body.node_id, shardId, generation: this.gen })
        return { granted: true, mode: 'resume', shardId, bucket: this.limiter.bucketOf(shardId), generation: this.gen, session }
      }
    }
    return this.grantIdentify(now, body.node_id, shardId, 'current')
  }

  /** After the ownership and handoff checks: the daily budget, then the bucket (shared by both sets). */
  private grantIdentify(now: number, nodeId: string, shardId: number, set: 'current' | 'next'): IdentifyOutcome {
    const wait = this.limiter.check(now, shardId)
    if (wait !== null) return { granted: false, reason: wait.reason, retryAfterMs: wait.retryAfterMs }
    const bucket = this.limiter.record(now, shardId)
    if (this.limiter.countsDaily) {
      this.tracker.grant(now, now - DAILY_WINDOW_MS + 1)
      this.markDurable()
    }
    this.events.push({ kind: 'identify_granted', nodeId, shardId, bucket, generation: this.gen, ...(set === 'next' ? { set } : {}) })
    return set === 'next'
      ? { granted: true, mode: 'identify', shardId, bucket, generation: this.gen, set }
      : { granted: true, mode: 'identify', shardId, bucket, generation: this.gen }
  }

  /**
   * A claim of a live reshard's next set: its owner in the next plan, its handoffs (a re-plan during the
   * reshard), then the budget and the buckets shared with the current set. No session is handed out:
   * deposited sessions belong to the current set's shard numbers.
   */
  private claimNext(now: number, body: IdentifyBody): IdentifyOutcome {
    const next = this.next
    const shardId = body.shard_id
    if (next === null) throw new AppError('not_owner', `no reshard is in progress: shard ${shardId} of a next set is not assigned to ${body.node_id}`)
    if (shardId >= next.totalShards) throw new AppError('invalid_request', `shard_id must be below the next set's total_shards (${next.totalShards})`)
    if (this.nodes.nameOf(next.plan.owners[shardId] ?? NO_NODE) !== body.node_id) {
      throw new AppError('not_owner', `shard ${shardId} of the next set is not assigned to ${body.node_id} in generation ${this.gen}`)
    }
    if (this.reshard !== null) return { granted: false, reason: 'handoff_pending', retryAfterMs: reshardWaitMs(this.reshard, this.live, this.leaseMs, now) }
    const handoffWaitMs = next.handoffs.waitMs(shardId, this.live, this.leaseMs, now)
    if (handoffWaitMs !== null) return { granted: false, reason: 'handoff_pending', retryAfterMs: handoffWaitMs }
    return this.grantIdentify(now, body.node_id, shardId, 'next')
  }

  /**
   * True when a `set: "next"` claim arrives after the reshard it belonged to switched in this process: the
   * node has not seen the switch yet, and its next-set shard is now a current-set one.
   */
  private nextClaimIsCurrent(): boolean {
    return this.next === null && this.lastReshardEnd?.outcome === 'switched' && this.lastReshardEnd.totalShards === this.settings.totalShards
  }

  /**
   * Starts a live reshard to `totalShards` (SPEC "Live resharding"): the next set is planned over the live
   * nodes and every plan carries it under a new generation. Refused: another shard count than the rules
   * allow (400), a reshard or a restart barrier in progress (409), a daily budget below N (409).
   */
  startReshard(now: number, totalShards: number): ReshardStarted {
    this.prepare(now)
    assertReshardAllowed(this.settings, totalShards, {
      live: this.next === null ? null : this.next.totalShards,
      barrier: this.reshard !== null,
      remainingBudget: this.limiter.remaining(now),
      outdated: this.outdatedNodes(4),
    })
    const from = this.settings.totalShards
    const next = this.newNextSet(totalShards, from, this.gen + 1)
    const planned = next.plan.next()
    next.plan.adopt(planned)
    this.next = next
    this.gen += 1
    this.events.push({ kind: 'generation_changed', from: this.gen - 1, to: this.gen })
    this.events.push({ kind: 'reshard_started', fromTotalShards: from, toTotalShards: totalShards, generation: this.gen })
    this.markDurable()
    return { from, to: totalShards, generation: this.gen }
  }

  /** Aborts the live reshard: its next set is dropped under a new generation (nodes stop its shards). */
  abortReshard(now: number): ReshardStarted {
    this.prepare(now)
    const next = this.next
    if (next === null) throw new AppError('not_found', 'no live reshard is in progress')
    this.next = null
    this.lastReshardEnd = { outcome: 'aborted', totalShards: next.totalShards }
    this.gen += 1
    this.events.push({ kind: 'generation_changed', from: this.gen - 1, to: this.gen })
    this.events.push({ kind: 'reshard_aborted', fromTotalShards: next.fromTotalShards, toTotalShards: next.totalShards, generation: this.gen, reason: 'operator' })
    this.markDurable()
    return { from: next.fromTotalShards, to: next.totalShards, generation: this.gen }
  }

  /** Up to `max` live nodes whose agent has not shown it knows live resharding, in byte order. */
  private outdatedNodes(max: number): string[] {
    const out: string[] = []
    for (const record of this.live.values()) if (!record.knowsNext) out.push(record.nodeId)
    return out.sort(compareBytes).slice(0, max)
  }

  /** A next set over the live nodes, planned with the deployment's planner. */
  private newNextSet(totalShards: number, from: number, startedAt: number): NextSet {
    const stable = this.settings.planner === 'stable'
    return new NextSet(totalShards, from, startedAt, this.nodes, this.live, this.draining, plannerFor(this.settings.planner), stable, () => this.markDurable())
  }

  /**
   * The switch (SPEC "Live resharding"), once every next-set shard is reported running: total_shards
   * becomes N and the next set the plan under a new generation; nodes stop their old-set shards (no
   * session deposit) and keep the next-set ones. Held sessions and old-set handoffs belong to the old
   * shard numbers and are dropped.
   */
  private switchIfComplete(): void {
    const next = this.next
    if (next === null || !next.complete()) return
    const from = this.settings.totalShards
    this.tracker.handoffs(0, Math.max(from, next.totalShards)) // every saved old-set handoff is deleted
    this.settings = { ...this.settings, totalShards: next.totalShards }
    this.livePlan = next.plan
    this.livePlan.releasesIds = true
    this.handoffs = new HandoffLedger(next.totalShards, this.nodes, (first, count) => this.tracker.handoffs(first, count))
    this.sessions.clear()
    if (this.settings.planner === 'stable') for (const nodeId of this.live.keys()) this.tracker.node(nodeId) // their stored ranges change
    this.next = null
    this.lastReshardEnd = { outcome: 'switched', totalShards: next.totalShards }
    this.gen += 1
    this.events.push({ kind: 'generation_changed', from: this.gen - 1, to: this.gen })
    this.events.push({ kind: 'reshard_switched', fromTotalShards: from, toTotalShards: next.totalShards, generation: this.gen })
    this.markDurable()
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
    const { handoffs, draining, live } = this
    const next = this.next
    const nodes = this.livePlan.records.map((record, i) => {
      const nextView = next === null ? null : { ...next.rangeOf(record.nodeId), readyShards: next.readyOf(record.nodeId) }
      return planNodeView(record, this.livePlan.rangeAt(i), draining.has(record.nodeId), handoffs.pendingFor(this.nodes.find(record.nodeId) ?? NO_NODE), nextView)
    })
    const { totalShards, maxConcurrency, leaseSeconds } = this.settings
    let reshard: ReshardView | null = null
    if (next !== null) {
      reshard = {
        phase: 'identifying',
        fromTotalShards: totalShards,
        totalShards: next.totalShards,
        generation: next.startedAt,
        readyShards: next.readyTotal,
        unassigned: next.plan.unassigned,
        pendingHandoffs: next.handoffs.pendingTotal(),
      }
    } else if (this.reshard !== null) {
      reshard = { phase: 'restart_barrier', totalShards, generation: this.reshard.generation, waitingNodes: this.reshard.waitingFor.length }
    }
    return {
      generation: this.gen,
      totalShards,
      maxConcurrency,
      leaseSeconds,
      unassigned: this.livePlan.unassigned,
      planner: this.settings.planner ?? 'contiguous',
      identify: this.limiter.budget(now),
      pendingHandoffs: handoffs.pendingTotal(),
      reshard,
      drainFlagsNotLive: [...draining].filter((nodeId) => !live.has(nodeId)).sort(compareBytes),
      nodes,
    }
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

  /** Sets or clears a node's drain flag (kept while the node is not live) and re-plans. */
  setDraining(now: number, nodeId: string, draining: boolean): DrainOutcome {
    this.prepare(now)
    if (!isValidName(nodeId)) throw new AppError('invalid_request', `node_id ${nameProblem(nodeId) ?? 'is invalid'}`)
    if (draining !== this.draining.has(nodeId)) {
      if (draining) this.draining.add(nodeId)
      else this.draining.delete(nodeId)
      this.tracker.drain(nodeId)
      this.markDurable()
      if (this.live.has(nodeId)) this.replan()
    }
    return { nodeId, draining, generation: this.gen, live: this.live.has(nodeId) }
  }

  /** Removes at once every live node whose certificate serial is revoked; returns their IDs. */
  removeRevoked(now: number, isRevoked: (serial: string) => boolean): string[] {
    this.prepare(now)
    const removed = [...this.live.values()].filter((record) => isRevoked(record.certSerial))
    for (const record of removed) {
      // what a revoked node deposited is no longer vouched for: its shards' next owners Identify
      this.sessions.discardFrom(record.nodeId)
      this.dropNode(record)
      this.events.push({ kind: 'node_removed', nodeId: record.nodeId, serial: record.certSerial, reason: 'revoked' })
    }
    this.settle()
    return removed.map((record) => record.nodeId)
  }

  /**
   * Expires nodes with now - lastSeen > lease and re-plans; O(1) when none is due. Every check-in calls
   * it, and while the head it found last is still the head and within its lease, it reads nothing:
   * reading the head of `live` is not O(1), because every check-in deletes and re-inserts its node and a
   * Map's iterator steps over the deleted entries at its front until the table is rebuilt (measured at
   * 10,000 nodes: 15 ms of every second of a fleet's steady state went to finding the head).
   */
  expireStaleNodes(now: number): string[] {
    const head = this.expiryHead
    if (head !== null && now - head.lastSeen <= this.leaseMs) return []
    const expired: NodeRecord[] = []
    let first: NodeRecord | null = null
    for (const record of this.live.values()) {
      if (now - record.lastSeen <= this.leaseMs) {
        first = record
        break
      }
      expired.push(record)
    }
    for (const record of expired) {
      this.dropNode(record)
      this.events.push({ kind: 'node_expired', nodeId: record.nodeId, lastSeen: record.lastSeen })
    }
    this.expiryHead = first // the head now: the expired ones before it are gone
    if (expired.length > 0) this.replan()
    return expired.map((record) => record.nodeId)
  }

  /** Takes a record out of `live`, forgetting it as expiry's head if it was (the head is then another). */
  private unlinkLive(record: NodeRecord): void {
    if (record === this.expiryHead) this.expiryHead = null
    this.live.delete(record.nodeId)
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
    const meta = stateMeta(this.settings, this.gen, this.livePlan.fingerprint, this.reshard, this.highestCrlNumber)
    const liveReshard = this.next === null ? undefined : persistedLiveReshard(this.next, this.nodes)
    const configured = this.configuredTotalShards === this.settings.totalShards ? undefined : this.configuredTotalShards
    if (liveReshard === undefined && configured === undefined) return meta // the common case: written exactly as before
    return { ...meta, ...(liveReshard === undefined ? {} : { liveReshard }), ...(configured === undefined ? {} : { configuredTotalShards: configured }) }
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
      if (this.handoffs.releaseAcknowledged(this.nodes.idOf(record.nodeId), body.generation) > 0) state = true
      if (this.next !== null && this.next.handoffs.releaseAcknowledged(this.nodes.idOf(record.nodeId), body.generation) > 0) state = true
      if (this.reshard?.acknowledge(record.nodeId, body.generation)) state = this.settleReshard() || true
    }
    return { record: changed, state }
  }

  /** Takes a node out of the live set; whatever it had to hand off is released with it. */
  private dropNode(record: NodeRecord): void {
    this.unlinkLive(record)
    this.handoffs.releaseNode(this.nodes.idOf(record.nodeId))
    if (this.reshard?.release(record.nodeId)) this.settleReshard()
    this.livePlan.leave(record.nodeId)
    if (this.next !== null) {
      this.next.handoffs.releaseNode(this.nodes.idOf(record.nodeId))
      this.next.forget(record.nodeId)
      this.next.plan.leave(record.nodeId)
    }
    this.touchNode(record.nodeId)
    this.stale = true
  }

  /** Recomputes the plan; bumps the generation and records handoffs only if a shard changed owner. */
  private replan(): void {
    this.stale = false
    this.replanCount += 1
    const next = this.livePlan.next()
    // A live reshard's next set is re-planned over the same membership change (computed before either
    // plan adopts: the current plan frees the IDs of nodes that left, which the next set's order still holds).
    const nextSetPlan = this.next?.plan.next()
    if (next.rangesChanged) this.markDurable()
    // The stable planner plans from the current ranges, so they are persisted with the node records.
    if (next.rangesChanged && this.settings.planner === 'stable') for (const nodeId of this.livePlan.changedNodes(next)) this.tracker.node(nodeId)
    // The generation a move is recorded at is the one this re-plan moves to.
    let moved = this.handoffs.recordMoves(this.livePlan.owners, next.owners, this.livePlan.ids, this.gen + 1)
    if (this.next !== null && nextSetPlan !== undefined) {
      const nextSet = this.next
      if (nextSet.handoffs.recordMoves(nextSet.plan.owners, nextSetPlan.owners, nextSet.plan.ids, this.gen + 1) || nextSetPlan.rangesChanged) {
        moved = true
        nextSet.changedAt = this.gen + 1 // readiness counts again from the plan that carries the new next ranges
        this.markDurable()
      }
      nextSet.plan.adopt(nextSetPlan)
      nextSet.recount()
    }
    if (moved) {
      this.gen += 1
      this.events.push({ kind: 'generation_changed', from: this.gen - 1, to: this.gen })
    }
    this.livePlan.adopt(next)
  }

  /** Drops a barrier nobody is waited for any more; true when it did. */
  private settleReshard(): boolean {
    if (this.reshard === null || this.reshard.active) return false
    this.reshard = null
    this.markDurable()
    return true
  }

  /** The parts and steps a restore works with (see core/controller-restore.ts). */
  private restoreHost(): RestoreHost {
    const self = this
    const { settings, live, draining, nodes, livePlan: plan, handoffs, tracker } = this
    return {
      settings, live, draining, nodes, plan, handoffs, tracker,
      get generation() { return self.gen },
      resume: (generation, crlNumber) => void ((this.gen = generation), (this.highestCrlNumber = crlNumber)),
      replan: () => this.replan(),
      forgetChanges: () => void this.takeDelta(),
      startBarrier: (barrier) => (this.reshard = barrier),
      settleReshard: () => void this.settleReshard(),
      emit: (event) => this.events.push(event),
      markDurable: () => this.markDurable(),
    }
  }
}
