/**
 * The controller state machine (SPEC "Controller state" to "Operator endpoints"): pure, with the clock
 * passed in as `now` (ms). The HTTP layer validates bodies and binds identities; the state store persists
 * takeDelta() whenever persistVersion moved; the audit log consumes drainEvents().
 *
 * Joins and capacity changes only mark the plan stale (`register`); `settle()` re-plans once for all the
 * check-ins that arrived together. Every other operation settles first, so it always sees a current plan.
 */
import { AppError } from '../errors.js'
import type { DurableState, PersistedNode, StateDelta, StateMeta } from './durable-state.js'
import { HandoffLedger } from './handoffs.js'
import { DAILY_WINDOW_MS, IdentifyLimiter } from './identify.js'
import { isValidName, nameProblem } from './names.js'
import { NO_NODE, NodeIndex } from './node-index.js'
import { newNodeRecord, persistedNode, planNodeView, restoredNodeRecord, type NodeRecord } from './node-record.js'
import { PlanFingerprinter, planFingerprintInOrder } from './plan-fingerprint.js'
import { compareBytes, planOrdered, type OrderedPlan } from './planner.js'
import { ReshardBarrier } from './reshard.js'
import type { CheckinBody, IdentifyBody } from './schemas.js'
import { assertValidSettings } from './settings.js'
import { ownersInOrder, sameRanges, type OrderedRanges } from './shard-map.js'
import { parseGuildId, shardForGuild } from './snowflake.js'
import { StateTracker } from './state-tracker.js'
import type {
  CertRef,
  CheckinOutcome,
  ControllerSettings,
  CoreEvent,
  DrainOutcome,
  IdentifyOutcome,
  NodeRange,
  PlanView,
  RouteOutcome,
} from './types.js'

const EMPTY_RANGE: NodeRange = { rangeStart: 0, rangeCount: 0 }
const NO_EVENTS: readonly CoreEvent[] = Object.freeze([])

/** What a check-in did besides renewing the lease (the plan part of the answer comes after settle()). */
export interface Registration {
  /** True when this check-in replaced the node's certificate (a rotation, to be audited). */
  readonly rotated: boolean
  readonly previousSerial: string | null
}

/** The decision core: node map, plan, generation, handoffs and Identify pacing. */
export class Controller {
  private readonly leaseMs: number
  /** Live nodes, re-inserted on every check-in: iteration order is lastSeen order, oldest first. */
  private readonly live = new Map<string, NodeRecord>()
  private readonly draining = new Set<string>()
  private readonly nodes = new NodeIndex()
  /** Nodes dropped since the last re-plan; their IDs are freed once the old mapping is gone. */
  private dropped: string[] = []
  private readonly tracker = new StateTracker()
  private readonly handoffs: HandoffLedger
  private readonly limiter: IdentifyLimiter
  /**
   * The plan: every live node (draining ones included) in byte order of node IDs, with its record, its
   * NodeIndex ID and its range as parallel arrays. The order is kept between re-plans and only merged
   * with the nodes that joined or left since (`orderStale`), so a re-plan at N = 10,000 sorts nothing.
   */
  private order: string[] = []
  private orderRecords: NodeRecord[] = []
  private orderIds: Int32Array = new Int32Array(0)
  private rangeStarts: Int32Array = new Int32Array(0)
  private rangeCounts: Int32Array = new Int32Array(0)
  /** Position in `order` per NodeIndex ID (valid only where order[position] is that node). */
  private positionById: Int32Array = new Int32Array(0)
  /** Nodes that joined since the order was last rebuilt. */
  private joined: string[] = []
  private orderStale = false
  private fingerprint = planFingerprintInOrder([], [], [])
  private readonly fingerprinter = new PlanFingerprinter()
  /** Owner ID per shard (NO_NODE: unassigned). */
  private owners: Int32Array
  /** The previous owner table, overwritten by the next re-plan. */
  private spareOwners: Int32Array
  private unassigned: number
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
    private readonly settings: ControllerSettings,
    restore?: { state: DurableState; now: number },
  ) {
    assertValidSettings(settings)
    this.leaseMs = settings.leaseSeconds * 1000
    this.owners = new Int32Array(settings.totalShards).fill(NO_NODE)
    this.spareOwners = new Int32Array(settings.totalShards)
    this.handoffs = new HandoffLedger(settings.totalShards, this.nodes, (first, count) => this.tracker.handoffs(first, count))
    this.unassigned = settings.totalShards
    const { maxConcurrency, identifyIntervalMs, dailyIdentifyLimit } = settings
    if (restore === undefined) {
      this.limiter = new IdentifyLimiter(maxConcurrency, identifyIntervalMs, dailyIdentifyLimit)
      return
    }
    const { state, now } = restore
    // Every bucket counts as granted at the restart: no burst of IDENTIFYs after a restart.
    // A grant stamped after `now` means the clock went back across the restart: count it as made now
    // (held a little longer) rather than drop it, which would undercount the budget.
    const grants = state.dailyGrants.map((t) => Math.min(t, now)).filter((t) => now - t < DAILY_WINDOW_MS)
    this.limiter = new IdentifyLimiter(maxConcurrency, identifyIntervalMs, dailyIdentifyLimit, now, grants)
    this.restoreState(state, now)
  }

  /** The current plan generation (of the settled plan). */
  get generation(): number {
    return this.gen
  }

  /** Moves whenever the durable state changed (health counts aside); settle() may move it too. */
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
    const range = this.rangeOf(nodeId)
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
    }
  }

  /**
   * Registers or renews a node (body already validated and bound to the certificate's CN). A join or a
   * capacity change only marks the plan stale; settle() re-plans once for all of them.
   */
  register(now: number, body: CheckinBody, cert: CertRef): Registration {
    this.expireStaleNodes(now)
    if (body.generation !== undefined && body.generation > this.gen) {
      throw new AppError(
        'invalid_request',
        `generation ${body.generation} is above the controller's current generation ${this.gen}: this node ran a plan this controller does not know ` +
          '(state_dir restored from an older copy, or lost?); restart its agent without its stored generation once its shards stopped (README "Restoring an older state_dir")',
      )
    }
    const existing = this.live.get(body.node_id)
    const rotated = existing !== undefined && existing.certSerial !== cert.serial
    if (rotated && !(cert.notBefore > existing.certNotBefore)) {
      throw new AppError('identity_conflict', `node ${body.node_id} is live with another certificate that is not older than this one`)
    }
    const record = existing ?? newNodeRecord(now, body, cert)
    this.nodes.idOf(record.nodeId) // every live node has an ID (see replan)
    if (existing === undefined) {
      this.joined.push(record.nodeId)
      this.orderStale = true
    }
    const previousSerial = rotated ? record.certSerial : null
    if (existing === undefined || record.capacity !== body.capacity) this.stale = true
    const changed = this.updateRecord(record, now, body, cert)
    if (rotated) this.events.push({ kind: 'node_rotated', nodeId: record.nodeId, fromSerial: previousSerial!, toSerial: cert.serial })
    // Delete and re-insert so that the Map stays in lastSeen order (expiry looks at the head only).
    this.live.delete(record.nodeId)
    this.live.set(record.nodeId, record)
    if (changed || existing === undefined) this.touchNode(record.nodeId)
    return { rotated, previousSerial }
  }

  /** Re-plans if check-ins made the plan stale. */
  settle(): void {
    if (this.stale) this.replan()
  }

  /** Decides an Identify claim: ownership, reshard, handoff, daily budget, then the bucket. */
  claimIdentify(now: number, body: IdentifyBody): IdentifyOutcome {
    this.prepare(now)
    const shardId = body.shard_id
    if (shardId >= this.settings.totalShards) {
      throw new AppError('invalid_request', `shard_id must be below total_shards (${this.settings.totalShards})`)
    }
    if (this.ownerOf(shardId) !== body.node_id) {
      throw new AppError('not_owner', `shard ${shardId} is not assigned to ${body.node_id} in generation ${this.gen}`)
    }
    if (this.reshard !== null) return { granted: false, reason: 'handoff_pending', retryAfterMs: this.reshardWaitMs(now) }
    const waitsFor = this.nodes.nameOf(this.handoffs.fromOf(shardId))
    const previousOwner = waitsFor === null ? undefined : this.live.get(waitsFor)
    if (previousOwner !== undefined) {
      // The first instant at which the previous owner counts as expired (now - lastSeen > lease).
      const retryAfterMs = previousOwner.lastSeen + this.leaseMs + 1 - now
      return { granted: false, reason: 'handoff_pending', retryAfterMs }
    }
    const wait = this.limiter.check(now, shardId)
    if (wait !== null) return { granted: false, reason: wait.reason, retryAfterMs: wait.retryAfterMs }
    const bucket = this.limiter.record(now, shardId)
    if (this.limiter.countsDaily) {
      this.tracker.grant(now, now - DAILY_WINDOW_MS + 1)
      this.markDurable()
    }
    this.events.push({ kind: 'identify_granted', nodeId: body.node_id, shardId, bucket, generation: this.gen })
    return { granted: true, shardId, bucket, generation: this.gen }
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
    const nodes = this.orderRecords.map((record, i) =>
      planNodeView(record, { rangeStart: this.rangeStarts[i]!, rangeCount: this.rangeCounts[i]! }, this.draining.has(record.nodeId)),
    )
    const { totalShards, maxConcurrency, leaseSeconds } = this.settings
    return { generation: this.gen, totalShards, maxConcurrency, leaseSeconds, unassigned: this.unassigned, nodes }
  }

  /** Live and draining node counts, and unassigned shards (for metrics; after settle()). */
  counts(): { readonly live: number; readonly draining: number; readonly unassigned: number } {
    let draining = 0
    for (const nodeId of this.live.keys()) if (this.draining.has(nodeId)) draining += 1
    return { live: this.live.size, draining, unassigned: this.unassigned }
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
    return { nodeId, draining, generation: this.gen }
  }

  /** Removes at once every live node whose certificate serial is revoked; returns their IDs. */
  removeRevoked(now: number, isRevoked: (serial: string) => boolean): string[] {
    this.prepare(now)
    const removed = [...this.live.values()].filter((record) => isRevoked(record.certSerial))
    for (const record of removed) {
      this.dropNode(record)
      this.events.push({ kind: 'node_removed', nodeId: record.nodeId, serial: record.certSerial, reason: 'revoked' })
    }
    this.settle()
    return removed.map((record) => record.nodeId)
  }

  /** Expires nodes with now - lastSeen > lease and re-plans; O(1) when none is due. */
  expireStaleNodes(now: number): string[] {
    const expired: NodeRecord[] = []
    for (const record of this.live.values()) {
      if (now - record.lastSeen <= this.leaseMs) break
      expired.push(record)
    }
    for (const record of expired) {
      this.dropNode(record)
      this.events.push({ kind: 'node_expired', nodeId: record.nodeId, lastSeen: record.lastSeen })
    }
    if (expired.length > 0) this.replan()
    return expired.map((record) => record.nodeId)
  }

  /** The node that owns a shard in the current plan, or null. */
  ownerOf(shardId: number): string | null {
    return this.nodes.nameOf(this.owners[shardId] ?? NO_NODE)
  }

  /** The whole durable state (a first write, a compaction). O(N + S). */
  snapshot(): DurableState {
    const nodes: PersistedNode[] = []
    for (const record of this.orderRecords) nodes.push(persistedNode(record))
    return {
      version: 2,
      meta: this.meta(),
      nodes,
      draining: [...this.draining].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
      handoffs: this.handoffs.entries(),
      dailyGrants: this.limiter.dailyGrants(),
    }
  }

  /** What changed in the durable state since the last call (settle() first). */
  takeDelta(): StateDelta {
    return this.tracker.take(this.meta(), {
      node: (nodeId) => {
        const record = this.live.get(nodeId)
        return record === undefined ? null : persistedNode(record)
      },
      isDraining: (nodeId) => this.draining.has(nodeId),
      handoffFrom: this.handoffs.tables.from,
      handoffGeneration: this.handoffs.tables.generation,
      nodeName: (id) => this.nodes.nameOf(id)!,
    })
  }

  private meta(): StateMeta {
    return {
      generation: this.gen,
      totalShards: this.settings.totalShards,
      maxConcurrency: this.settings.maxConcurrency,
      planFingerprint: this.fingerprint,
      reshard: this.reshard === null ? null : { generation: this.reshard.generation, waitingFor: this.reshard.waitingFor },
      crlNumber: this.highestCrlNumber?.toString() ?? null,
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

  /** Applies a check-in to a record; true when something persisted changed. */
  private updateRecord(record: NodeRecord, now: number, body: CheckinBody, cert: CertRef): boolean {
    let changed = record.capacity !== body.capacity || record.certSerial !== cert.serial
    record.capacity = body.capacity
    record.certSerial = cert.serial
    record.certNotBefore = cert.notBefore
    record.lastSeen = now
    record.readyShards = body.ready_shards
    record.startingShards = body.starting_shards
    record.backoffShards = body.backoff_shards
    record.fatalShards = body.fatal_shards
    if (body.generation !== undefined) {
      if (record.reportedGeneration !== body.generation) changed = true
      record.reportedGeneration = body.generation
      if (this.handoffs.releaseAcknowledged(this.nodes.idOf(record.nodeId), body.generation) > 0) changed = true
      if (this.reshard?.acknowledge(record.nodeId, body.generation)) changed = this.settleReshard() || true
    }
    return changed
  }

  /** Takes a node out of the live set; whatever it had to hand off is released with it. */
  private dropNode(record: NodeRecord): void {
    this.live.delete(record.nodeId)
    this.handoffs.releaseNode(this.nodes.idOf(record.nodeId))
    if (this.reshard?.release(record.nodeId)) this.settleReshard()
    this.dropped.push(record.nodeId)
    this.orderStale = true
    this.touchNode(record.nodeId)
    this.stale = true
  }

  /** Where a node stands in `order` (-1: not in it). */
  private positionOf(nodeId: string): number {
    const id = this.nodes.find(nodeId)
    const at = id === undefined ? -1 : (this.positionById[id] ?? -1)
    return at >= 0 && this.order[at] === nodeId ? at : -1
  }

  /** The range of a node in the current plan (empty when it has none). */
  private rangeOf(nodeId: string): NodeRange {
    const at = this.positionOf(nodeId)
    return at < 0 ? EMPTY_RANGE : { rangeStart: this.rangeStarts[at]!, rangeCount: this.rangeCounts[at]! }
  }

  /**
   * Brings `order` up to date with the live set in one merge pass: nodes that left are skipped, those that
   * joined (sorted among themselves) are merged in. O(N + J log J) with no lookup per kept node, so one
   * join at N = 10,000 costs array copies, not 10,000 map lookups. A node that left and came back since
   * is removed and merged in again (its record is a new one).
   */
  private rebuildOrder(): void {
    const oldOrder = this.order
    const oldRecords = this.orderRecords
    const oldIds = this.orderIds
    const placedAt = (nodeId: string) => this.positionOf(nodeId) // in the old order: replaced only at the end
    const removed = new Uint8Array(oldOrder.length)
    for (const nodeId of this.dropped) {
      const at = placedAt(nodeId)
      if (at >= 0) removed[at] = 1
    }
    const fresh = [...new Set([...this.joined, ...this.dropped])]
      .filter((nodeId) => this.live.has(nodeId) && (placedAt(nodeId) < 0 || removed[placedAt(nodeId)] === 1))
      .sort(compareBytes)
    const order: string[] = []
    const records: NodeRecord[] = []
    const ids: number[] = []
    let j = 0
    for (let i = 0; i <= oldOrder.length; i++) {
      const next = i < oldOrder.length ? oldOrder[i]! : null
      while (j < fresh.length && (next === null || fresh[j]! < next)) {
        const nodeId = fresh[j++]!
        order.push(nodeId)
        records.push(this.live.get(nodeId)!)
        ids.push(this.nodes.idOf(nodeId))
      }
      if (next === null || removed[i] === 1) continue
      order.push(next)
      records.push(oldRecords[i]!)
      ids.push(oldIds[i]!)
    }
    this.order = order
    this.orderRecords = records
    this.orderIds = Int32Array.from(ids)
    const positions = new Int32Array(this.nodes.size).fill(-1)
    for (let at = 0; at < ids.length; at++) positions[ids[at]!] = at
    this.positionById = positions
    this.joined = []
    this.orderStale = false
  }

  /** The planner over the live set in its kept byte order (rebuilt first if nodes joined or left). */
  private computePlan(): OrderedPlan {
    if (this.orderStale) this.rebuildOrder()
    const records = this.orderRecords
    const capacities = new Int32Array(records.length)
    for (let i = 0; i < records.length; i++) capacities[i] = records[i]!.capacity
    const draining = new Uint8Array(records.length)
    for (const nodeId of this.draining) {
      const at = this.positionOf(nodeId)
      if (at >= 0) draining[at] = 1
    }
    return planOrdered(this.settings.totalShards, capacities, draining)
  }

  /** Recomputes the plan; bumps the generation and records handoffs only if a shard changed owner. */
  private replan(): void {
    this.stale = false
    this.replanCount += 1
    const before: OrderedRanges = { order: this.order, starts: this.rangeStarts, counts: this.rangeCounts }
    const plan = this.computePlan()
    if (!sameRanges(before, { order: this.order, starts: plan.starts, counts: plan.counts })) {
      this.fingerprint = this.fingerprinter.fingerprint(this.order, plan.starts, plan.counts)
      this.markDurable()
    }
    const owners = ownersInOrder(this.orderIds, plan.starts, plan.counts, this.settings.totalShards, this.spareOwners)
    // The generation a move is recorded at is the one this re-plan moves to.
    if (this.handoffs.recordMoves(this.owners, owners, this.orderIds, this.gen + 1)) {
      this.gen += 1
      this.events.push({ kind: 'generation_changed', from: this.gen - 1, to: this.gen })
    }
    this.rangeStarts = plan.starts
    this.rangeCounts = plan.counts
    this.spareOwners = this.owners
    this.owners = owners
    this.unassigned = this.settings.totalShards - plan.assigned
    // A dropped node that checked in again since keeps its ID (it is live and in the new order).
    for (const nodeId of this.dropped) if (!this.live.has(nodeId)) this.nodes.release(nodeId)
    this.dropped = []
  }

  /**
   * Restores nodes, drains, plan and handoffs. The plan is recomputed from the restored nodes: the same
   * fingerprint means the same mapping (no shard moves). Another total_shards or another fingerprint (a
   * planner change) means another mapping: a new generation, and a reshard barrier over every restored node.
   */
  private restoreState(state: DurableState, now: number): void {
    const { meta } = state
    this.gen = meta.generation
    if (meta.crlNumber !== null) this.highestCrlNumber = BigInt(meta.crlNumber)
    for (const nodeId of state.draining) this.draining.add(nodeId)
    for (const node of state.nodes) {
      this.live.set(node.nodeId, restoredNodeRecord(now, node))
      this.nodes.idOf(node.nodeId)
      this.joined.push(node.nodeId)
      this.orderStale = true
    }
    const plan = this.computePlan()
    const resharded =
      meta.totalShards !== this.settings.totalShards || planFingerprintInOrder(this.order, plan.starts, plan.counts) !== meta.planFingerprint
    if (!resharded) {
      this.rangeStarts = plan.starts
      this.rangeCounts = plan.counts
      this.fingerprint = meta.planFingerprint
      this.owners = ownersInOrder(this.orderIds, plan.starts, plan.counts, this.settings.totalShards)
      this.unassigned = this.settings.totalShards - plan.assigned
      for (const { shardId, fromNode, generation } of state.handoffs) {
        // Only for a live previous owner, a shard it no longer owns, and one entry per shard.
        if (shardId >= this.settings.totalShards || !this.live.has(fromNode) || generation > this.gen) continue
        const fromId = this.nodes.idOf(fromNode)
        if (this.owners[shardId] !== fromId && this.handoffs.fromOf(shardId) === NO_NODE) this.handoffs.record(shardId, fromId, generation)
      }
      this.takeDelta() // restored as saved: the marks of the restore are not changes
    } else {
      this.replan() // from an empty mapping: a new generation whenever any shard is assigned
      for (const { shardId } of state.handoffs) this.tracker.handoffs(shardId, 1) // dropped: the barrier covers them
    }
    this.restoreReshard(meta, resharded)
  }

  /** Starts or continues a reshard barrier (see core/reshard.ts); audited as `reshard`. */
  private restoreReshard(meta: StateMeta, resharded: boolean): void {
    const { totalShards, maxConcurrency } = this.settings
    const concurrencyChanged = meta.maxConcurrency !== null && meta.maxConcurrency !== maxConcurrency
    if (resharded && this.live.size > 0 && this.gen > meta.generation) {
      this.reshard = new ReshardBarrier(this.gen, this.live.keys())
    } else if (meta.reshard !== null) {
      this.reshard = new ReshardBarrier(meta.reshard.generation, meta.reshard.waitingFor.filter((id) => this.live.has(id)))
    }
    if (resharded || concurrencyChanged) {
      this.events.push({
        kind: 'reshard',
        reason: meta.totalShards !== totalShards ? 'total_shards' : resharded ? 'planner' : 'max_concurrency',
        fromTotalShards: meta.totalShards,
        toTotalShards: totalShards,
        fromMaxConcurrency: meta.maxConcurrency,
        toMaxConcurrency: maxConcurrency,
        generation: this.gen,
        waitingFor: this.reshard?.waitingFor.length ?? 0,
      })
    }
    this.settleReshard()
    // Written before the first answer, or the next restart would not know the new settings and barrier.
    if (resharded || meta.maxConcurrency !== maxConcurrency || meta.reshard !== null) this.markDurable()
  }

  /** Drops a barrier nobody is waited for any more; true when it did. */
  private settleReshard(): boolean {
    if (this.reshard === null || this.reshard.active) return false
    this.reshard = null
    this.markDurable()
    return true
  }

  /** Until the last waited-for node's lease would run out (it may report earlier). */
  private reshardWaitMs(now: number): number {
    let until = now + 1
    for (const nodeId of this.reshard?.waitingFor ?? []) {
      const record = this.live.get(nodeId)
      if (record !== undefined) until = Math.max(until, record.lastSeen + this.leaseMs + 1)
    }
    return until - now
  }
}
