/**
 * The controller state machine (SPEC "Controller state" to "Operator endpoints"): pure, with the clock
 * passed in as `now` (ms). The HTTP layer validates bodies and binds identities; the state store
 * persists snapshot() whenever persistVersion moved; the audit log consumes drainEvents().
 */
import { AppError } from '../errors.js'
import { HandoffLedger } from './handoffs.js'
import { DAILY_WINDOW_MS, IdentifyLimiter } from './identify.js'
import { isValidName, nameProblem } from './names.js'
import { NO_NODE, NodeIndex } from './node-index.js'
import { newNodeRecord, planNodeView, restoredNodeRecord, snapshotNode, type NodeRecord } from './node-record.js'
import { planShards } from './planner.js'
import type { CheckinBody, IdentifyBody } from './schemas.js'
import { assertValidSettings } from './settings.js'
import { ownersFromRanges, sameRanges } from './shard-map.js'
import { parseGuildId, shardForGuild } from './snowflake.js'
import type {
  CertRef,
  CheckinOutcome,
  ControllerSettings,
  ControllerSnapshot,
  CoreEvent,
  DrainOutcome,
  IdentifyOutcome,
  NodeRange,
  PlanView,
  RouteOutcome,
} from './types.js'

const EMPTY_RANGE: NodeRange = { rangeStart: 0, rangeCount: 0 }

/** The decision core: node map, plan, generation, handoffs and Identify pacing. */
export class Controller {
  private readonly leaseMs: number
  /** Live nodes, re-inserted on every check-in: iteration order is lastSeen order, oldest first. */
  private readonly live = new Map<string, NodeRecord>()
  private readonly draining = new Set<string>()
  private readonly nodes = new NodeIndex()
  /** Nodes dropped since the last re-plan; their IDs are freed once the old mapping is gone. */
  private dropped: string[] = []
  private readonly handoffs: HandoffLedger
  private readonly limiter: IdentifyLimiter
  /** Ranges of every live node, in byte order of node IDs. */
  private ranges = new Map<string, NodeRange>()
  /** Owner ID per shard (NO_NODE: unassigned). */
  private owners: Int32Array
  private unassigned: number
  private gen = 0
  private version = 0
  /** The highest CRL number installed so far (carried for the runtime, persisted, never decided on here). */
  private highestCrlNumber: bigint | null = null
  private events: CoreEvent[] = []

  /** A fresh controller, or one restored from a snapshot taken before a restart at `restore.now`. */
  constructor(
    private readonly settings: ControllerSettings,
    restore?: { snapshot: ControllerSnapshot; now: number },
  ) {
    assertValidSettings(settings)
    this.leaseMs = settings.leaseSeconds * 1000
    this.owners = new Int32Array(settings.totalShards).fill(NO_NODE)
    this.handoffs = new HandoffLedger(settings.totalShards, this.nodes)
    this.unassigned = settings.totalShards
    const { maxConcurrency, identifyIntervalMs, dailyIdentifyLimit } = settings
    if (restore === undefined) {
      this.limiter = new IdentifyLimiter(maxConcurrency, identifyIntervalMs, dailyIdentifyLimit)
      return
    }
    const { snapshot, now } = restore
    // Every bucket counts as granted at the restart: no burst of IDENTIFYs after a restart.
    // A grant stamped after `now` means the clock went back across the restart: count it as made now
    // (held a little longer) rather than drop it, which would undercount the budget.
    const grants = snapshot.dailyGrants.map((t) => Math.min(t, now)).filter((t) => now - t < DAILY_WINDOW_MS)
    this.limiter = new IdentifyLimiter(maxConcurrency, identifyIntervalMs, dailyIdentifyLimit, now, grants)
    this.restoreState(snapshot, now)
  }

  /** The current plan generation. */
  get generation(): number {
    return this.gen
  }

  /** The highest CRL number recorded (restored from the snapshot or by recordCrlNumber), or null. */
  get crlNumber(): bigint | null {
    return this.highestCrlNumber
  }

  /** Records an installed CRL's number; only a higher one changes (and so persists) anything. */
  recordCrlNumber(crlNumber: bigint): void {
    if (this.highestCrlNumber !== null && crlNumber <= this.highestCrlNumber) return
    this.highestCrlNumber = crlNumber
    this.version += 1
  }

  /** Moves whenever snapshot() would return something different (health counts aside). */
  get persistVersion(): number {
    return this.version
  }

  /** Returns and clears the events accumulated since the last call. */
  drainEvents(): CoreEvent[] {
    const events = this.events
    this.events = []
    return events
  }

  /** Registers or renews a node (body already validated and bound to the certificate's CN). */
  checkIn(now: number, body: CheckinBody, cert: CertRef): CheckinOutcome {
    this.expireStaleNodes(now)
    if (body.generation !== undefined && body.generation > this.gen) {
      throw new AppError(
        'invalid_request',
        `generation ${body.generation} is above the controller's current generation ${this.gen}`,
      )
    }
    const existing = this.live.get(body.node_id)
    const rotated = existing !== undefined && existing.certSerial !== cert.serial
    if (rotated && !(cert.notBefore > existing.certNotBefore)) {
      throw new AppError(
        'identity_conflict',
        `node ${body.node_id} is live with another certificate that is not older than this one`,
      )
    }
    const record = existing ?? newNodeRecord(now, body, cert)
    this.nodes.idOf(record.nodeId) // every live node has an ID (see replan)
    const previousSerial = rotated ? record.certSerial : null
    const replan = existing === undefined || record.capacity !== body.capacity
    const changed = this.updateRecord(record, now, body, cert)
    if (rotated) {
      const fromSerial = previousSerial!
      this.events.push({ kind: 'node_rotated', nodeId: record.nodeId, fromSerial, toSerial: cert.serial })
    }
    // Delete and re-insert so that the Map stays in lastSeen order (expiry looks at the head only).
    this.live.delete(record.nodeId)
    this.live.set(record.nodeId, record)
    if (changed || existing === undefined) this.version += 1
    if (replan) this.replan()
    const range = this.ranges.get(record.nodeId) ?? EMPTY_RANGE
    return {
      generation: this.gen,
      totalShards: this.settings.totalShards,
      leaseSeconds: this.settings.leaseSeconds,
      maxConcurrency: this.settings.maxConcurrency,
      rangeStart: range.rangeStart,
      rangeCount: range.rangeCount,
      rotated,
      previousSerial,
    }
  }

  /** Decides an Identify claim: ownership, handoff, daily budget, then the bucket. */
  claimIdentify(now: number, body: IdentifyBody): IdentifyOutcome {
    this.expireStaleNodes(now)
    const shardId = body.shard_id
    if (shardId >= this.settings.totalShards) {
      throw new AppError('invalid_request', `shard_id must be below total_shards (${this.settings.totalShards})`)
    }
    if (this.ownerOf(shardId) !== body.node_id) {
      throw new AppError('not_owner', `shard ${shardId} is not assigned to ${body.node_id} in generation ${this.gen}`)
    }
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
    if (this.limiter.countsDaily) this.version += 1
    this.events.push({ kind: 'identify_granted', nodeId: body.node_id, shardId, bucket, generation: this.gen })
    return { granted: true, shardId, bucket, generation: this.gen }
  }

  /** Which node serves a guild (raw decimal snowflake, echoed back as given). */
  route(now: number, guildId: string): RouteOutcome {
    this.expireStaleNodes(now)
    const shardId = shardForGuild(parseGuildId(guildId), this.settings.totalShards)
    return { guildId, shardId, nodeId: this.ownerOf(shardId), generation: this.gen }
  }

  /** The operator's view of the plan, nodes in byte order. */
  plan(now: number): PlanView {
    this.expireStaleNodes(now)
    const nodes = [...this.ranges].map(([nodeId, range]) =>
      planNodeView(this.live.get(nodeId)!, range, this.draining.has(nodeId)),
    )
    return {
      generation: this.gen,
      totalShards: this.settings.totalShards,
      maxConcurrency: this.settings.maxConcurrency,
      leaseSeconds: this.settings.leaseSeconds,
      unassigned: this.unassigned,
      nodes,
    }
  }

  /** Sets or clears a node's drain flag (kept while the node is not live) and re-plans. */
  setDraining(now: number, nodeId: string, draining: boolean): DrainOutcome {
    this.expireStaleNodes(now)
    if (!isValidName(nodeId)) throw new AppError('invalid_request', `node_id ${nameProblem(nodeId) ?? 'is invalid'}`)
    if (draining !== this.draining.has(nodeId)) {
      if (draining) this.draining.add(nodeId)
      else this.draining.delete(nodeId)
      this.version += 1
      if (this.live.has(nodeId)) this.replan()
    }
    return { nodeId, draining, generation: this.gen }
  }

  /** Removes at once every live node whose certificate serial is revoked; returns their IDs. */
  removeRevoked(now: number, isRevoked: (serial: string) => boolean): string[] {
    this.expireStaleNodes(now)
    const removed = [...this.live.values()].filter((record) => isRevoked(record.certSerial))
    for (const record of removed) {
      this.dropNode(record)
      this.events.push({ kind: 'node_removed', nodeId: record.nodeId, serial: record.certSerial, reason: 'revoked' })
    }
    if (removed.length > 0) this.replan()
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

  /** Everything that must survive a restart. */
  snapshot(): ControllerSnapshot {
    return {
      version: 1,
      generation: this.gen,
      totalShards: this.settings.totalShards,
      nodes: [...this.ranges].map(([nodeId, range]) => snapshotNode(this.live.get(nodeId)!, range)),
      draining: [...this.draining].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
      handoffs: this.handoffs.entries(),
      dailyGrants: this.limiter.dailyGrants(),
      ...(this.highestCrlNumber === null ? {} : { crlNumber: this.highestCrlNumber.toString() }),
    }
  }

  /** Applies a check-in to a record; true when something snapshot() returns changed. */
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
    }
    return changed
  }

  /** Takes a node out of the live set; whatever it had to hand off is released with it. */
  private dropNode(record: NodeRecord): void {
    this.live.delete(record.nodeId)
    this.handoffs.releaseNode(this.nodes.idOf(record.nodeId))
    this.dropped.push(record.nodeId)
    this.version += 1
  }

  /** Recomputes the plan; bumps the generation and records handoffs only if a shard changed owner. */
  private replan(): void {
    const inputs = [...this.live.values()].map((record) => ({
      nodeId: record.nodeId,
      capacity: record.capacity,
      draining: this.draining.has(record.nodeId),
    }))
    const plan = planShards(this.settings.totalShards, inputs)
    if (!sameRanges(this.ranges, plan.ranges)) this.version += 1
    const owners = ownersFromRanges(plan.ranges, this.settings.totalShards, this.nodes)
    const isLive = new Uint8Array(this.nodes.size)
    for (const nodeId of this.live.keys()) isLive[this.nodes.idOf(nodeId)] = 1
    const before = this.owners
    let moved = false
    for (let shardId = 0; shardId < owners.length; shardId++) {
      const from = before[shardId]!
      const to = owners[shardId]!
      if (from === to) continue
      if (!moved) {
        moved = true
        this.gen += 1
        this.events.push({ kind: 'generation_changed', from: this.gen - 1, to: this.gen })
      }
      this.trackHandoff(shardId, from, to, isLive)
    }
    this.ranges = plan.ranges
    this.owners = owners
    this.unassigned = plan.unassigned
    for (const nodeId of this.dropped) this.nodes.release(nodeId)
    this.dropped = []
  }

  /** A shard left `from` for `to` at the current generation (SPEC "Handoff safety"). */
  private trackHandoff(shardId: number, from: number, to: number, isLive: Uint8Array): void {
    const waitsFor = this.handoffs.fromOf(shardId)
    if (waitsFor !== NO_NODE) {
      // Back to the node it waits for: nobody else can have identified it. Elsewhere: keep the original.
      if (waitsFor === to) this.handoffs.clear(shardId)
    } else if (from !== NO_NODE && isLive[from] === 1) {
      this.handoffs.record(shardId, from, this.gen)
    }
  }

  /** Restores nodes, drains, mapping and handoffs; a changed plan (new S, new planner) bumps the generation. */
  private restoreState(snapshot: ControllerSnapshot, now: number): void {
    this.gen = snapshot.generation
    if (snapshot.crlNumber !== undefined) this.highestCrlNumber = BigInt(snapshot.crlNumber)
    for (const nodeId of snapshot.draining) this.draining.add(nodeId)
    for (const node of snapshot.nodes) {
      this.live.set(node.nodeId, restoredNodeRecord(now, node))
      this.nodes.idOf(node.nodeId)
    }
    if (snapshot.totalShards === this.settings.totalShards) {
      const ranges = new Map<string, NodeRange>()
      for (const { nodeId, rangeStart, rangeCount } of snapshot.nodes) ranges.set(nodeId, { rangeStart, rangeCount })
      this.owners = ownersFromRanges(ranges, this.settings.totalShards, this.nodes)
      this.ranges = ranges
      for (const { shardId, fromNode, generation } of snapshot.handoffs) {
        // Only for a live previous owner, a shard it no longer owns, and one entry per shard.
        if (shardId >= this.settings.totalShards || !this.live.has(fromNode) || generation > this.gen) continue
        const fromId = this.nodes.idOf(fromNode)
        if (this.owners[shardId] !== fromId && this.handoffs.fromOf(shardId) === NO_NODE) {
          this.handoffs.record(shardId, fromId, generation)
        }
      }
    }
    this.replan()
  }
}
