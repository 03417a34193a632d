/**
 * Everything that changes the shard count, beside the controller's current plan: a live reshard's next
 * set (its claims, its re-plans, its switch and abort, SPEC "Live resharding"), the restart barrier (a
 * restart with another plan: core/reshard.ts), and what an abort or a switch leaves behind.
 *
 * One session per shard, across reshards: an abort retires a next set whose shards some nodes may still
 * run, and a switch retires the old set the same way, until each of those nodes reports the abort's or the
 * switch's generation (its agent stopped them before it reports it), its lease runs out, or it leaves. A
 * new reshard is refused with 409 `reshard_in_progress` until then (the SPEC's second option): its next
 * set then starts with no shard of any count still running anywhere but where the plan puts it.
 */
import { AppError } from '../errors.js'
import type { PersistedLiveReshard, StateMeta } from './durable-state.js'
import { assertReshardAllowed, persistedLiveReshard, restoreLiveReshard } from './live-reshard.js'
import { NextSet } from './next-set.js'
import { NO_NODE, type NodeIndex } from './node-index.js'
import type { NodeRecord } from './node-record.js'
import { compareBytes } from './planner.js'
import { plannerFor } from './planners.js'
import { ReshardBarrier, reshardWaitMs } from './reshard.js'
import type { IdentifyBody } from './schemas.js'
import type { ControllerSettings, CoreEvent, IdentifyOutcome, NextRange, ReshardStarted, ReshardView } from './types.js'

/** What the reshards read and change of the controller. */
export interface ReshardHost {
  readonly nodes: NodeIndex
  readonly live: ReadonlyMap<string, NodeRecord>
  readonly draining: ReadonlySet<string>
  readonly leaseMs: number
  /** The settings in force (total_shards changes at a switch). */
  readonly settings: ControllerSettings
  readonly generation: number
  /** Moves to the next generation (audited as generation_changed) and returns it. */
  advanceGeneration(): number
  emit(event: CoreEvent): void
  markDurable(): void
  /** When the lease of a node that may run shards counts from (live or revoked inside its lease), or undefined. */
  leaseFrom(nodeId: string): number | undefined
  /** Names of revoked nodes inside their lease (they may run what they had). */
  revokedNames(): Iterable<string>
  /** The switch: the controller makes `next` its plan, with `next.totalShards` shards. */
  adoptNextSet(next: NextSet): void
}

/** A finished reshard's retired set, until every node that may run its shards applied the end. */
interface Retired {
  readonly totalShards: number
  readonly barrier: ReshardBarrier
}

/** The live reshard, the restart barrier and the retired set of a controller. */
export class Reshards {
  private next: NextSet | null = null
  /** How the last live reshard ended in this process: a late next-set claim after a switch is a current-set one. */
  private lastEnd: { readonly outcome: 'switched' | 'aborted'; readonly totalShards: number } | null = null
  /** Set after a restart with another plan (total_shards, planner), until every restored node applied it. */
  private barrier: ReshardBarrier | null = null
  private retired: Retired | null = null

  constructor(private readonly host: ReshardHost) {}

  /** The live reshard's next set, or null. */
  get nextSet(): NextSet | null {
    return this.next
  }

  /** The restart barrier in force, or null. */
  get restartBarrier(): ReshardBarrier | null {
    return this.barrier
  }

  /** Installs a restart barrier (a restore). */
  startBarrier(barrier: ReshardBarrier): void {
    this.barrier = barrier
  }

  /** Restores a live reshard in progress (`resharded`: the restart changed the plan, so it is aborted) and a retired set. */
  restore(meta: StateMeta, resharded: boolean, holders: { readonly mayRunShards: (nodeId: string) => boolean; readonly isRevoked: (nodeId: string) => boolean }): void {
    const saved = meta.liveReshard
    if (saved !== undefined) {
      if (resharded) {
        // another configuration supersedes the live reshard: its next set is dropped, nodes stop it (the barrier waits for them)
        this.host.emit({ kind: 'reshard_aborted', fromTotalShards: saved.fromTotalShards, toTotalShards: saved.toTotalShards, generation: this.host.generation, reason: 'restart' })
        this.host.markDurable()
      } else {
        this.next = this.newNextSet(saved.toTotalShards, saved.fromTotalShards, saved.startedAt)
        restoreLiveReshard(this.next, saved, holders, this.host.nodes, this.host.generation)
      }
    }
    if (meta.retired !== undefined) {
      const waiting = meta.retired.waitingFor.filter(holders.mayRunShards)
      if (waiting.length > 0) this.retired = { totalShards: meta.retired.totalShards, barrier: new ReshardBarrier(meta.retired.generation, waiting) }
    }
  }

  /** A node's part of the next set for its check-in answer, or null without a live reshard. */
  nextRangeOf(nodeId: string): NextRange | null {
    const next = this.next
    if (next === null) return null
    const range = next.rangeOf(nodeId)
    return { totalShards: next.totalShards, rangeStart: range.rangeStart, rangeCount: range.rangeCount }
  }

  /** A node joined the live set. */
  join(nodeId: string): void {
    this.next?.plan.join(nodeId)
  }

  /**
   * A check-in of `nodeId` (ID `id`) reported running `generation`: releases what it acknowledges; true when
   * that changed durable state. `revokedUpTo`: a revoked holder of the name owns the handoffs at or below
   * it, and no check-in speaks for it.
   */
  acknowledge(nodeId: string, id: number, generation: number, revokedUpTo: number | undefined): boolean {
    let changed = false
    if (this.next !== null && this.next.handoffs.releaseAcknowledged(id, generation, revokedUpTo) > 0) changed = true
    if (revokedUpTo !== undefined) return changed
    if (this.barrier?.acknowledge(nodeId, generation)) changed = this.settleBarrier() || true
    if (this.retired?.barrier.acknowledge(nodeId, generation)) changed = this.settleRetired() || true
    return changed
  }

  /** After a check-in was registered: its next-set readiness; the switch when the plan is settled. */
  afterCheckin(nodeId: string, nextReadyShards: number | undefined, generation: number | undefined, settled: boolean): void {
    if (this.next === null) return
    this.next.report(nodeId, nextReadyShards, generation)
    if (settled) this.switchIfComplete()
  }

  /**
   * A node left the live set (`id` its node ID). Expired (`revoked` false): it stopped everything, so what
   * waited for it is released. Revoked: it may still run what it had, so that waits for releaseRevoked.
   */
  drop(nodeId: string, id: number, revoked: boolean, revokedUpTo: number | undefined): void {
    if (!revoked) {
      if (this.barrier?.release(nodeId)) this.settleBarrier()
      if (this.retired?.barrier.release(nodeId)) this.settleRetired()
      this.next?.handoffs.releaseAcknowledged(id, Infinity, revokedUpTo)
    }
    if (this.next !== null) {
      this.next.forget(nodeId)
      this.next.plan.leave(nodeId)
    }
  }

  /** A revoked holder's lease ran out: what waited for it is released (`live`: the name checked in again since). */
  releaseRevoked(nodeId: string, id: number, upTo: number, live: boolean): void {
    this.next?.handoffs.releaseAcknowledged(id, upTo)
    if (live) return // the name's new holder still answers for the barriers
    if (this.barrier?.release(nodeId)) this.settleBarrier()
    if (this.retired?.barrier.release(nodeId)) this.settleRetired()
  }

  /**
   * Re-plans the next set over the same membership change as the current plan, to be adopted at
   * `generation`; true when it moved a shard or changed a range. Called before the current plan adopts its
   * re-plan (which frees the IDs of nodes that left, that the next set's order still holds).
   */
  replan(generation: number, revokedIds: readonly number[]): boolean {
    const next = this.next
    if (next === null) return false
    const planned = next.plan.next()
    let moved = false
    if (next.handoffs.recordMoves(next.plan.owners, planned.owners, next.plan.ids, generation, revokedIds) || planned.rangesChanged) {
      moved = true
      next.changedAt = generation // readiness counts again from the plan that carries the new next ranges
      this.host.markDurable()
    }
    next.plan.adopt(planned)
    next.recount()
    return moved
  }

  /** How long an Identify waits for the restart barrier, or null when none is in force. */
  barrierWaitMs(now: number): number | null {
    return this.barrier === null ? null : reshardWaitMs(this.barrier, (nodeId) => this.host.leaseFrom(nodeId), this.host.leaseMs, now)
  }

  /**
   * True when a `set: "next"` claim arrives after the reshard it belonged to switched in this process: the
   * node has not seen the switch yet, and its next-set shard is now a current-set one.
   */
  nextClaimIsCurrent(): boolean {
    return this.next === null && this.lastEnd?.outcome === 'switched' && this.lastEnd.totalShards === this.host.settings.totalShards
  }

  /**
   * A claim of the next set: its owner in the next plan, its handoffs (a re-plan during the reshard), then
   * `grant` (the budget and the buckets shared with the current set). No session is handed out: deposited
   * sessions belong to the current set's shard numbers.
   */
  claimNext(now: number, body: IdentifyBody, grant: () => IdentifyOutcome): IdentifyOutcome {
    const next = this.next
    const shardId = body.shard_id
    if (next === null) throw new AppError('not_owner', `no reshard is in progress: shard ${shardId} of a next set is not assigned to ${body.node_id}`)
    if (shardId >= next.totalShards) throw new AppError('invalid_request', `shard_id must be below the next set's total_shards (${next.totalShards})`)
    if (this.host.nodes.nameOf(next.plan.owners[shardId] ?? NO_NODE) !== body.node_id) {
      throw new AppError('not_owner', `shard ${shardId} of the next set is not assigned to ${body.node_id} in generation ${this.host.generation}`)
    }
    const barrierWaitMs = this.barrierWaitMs(now)
    if (barrierWaitMs !== null) return { granted: false, reason: 'handoff_pending', retryAfterMs: barrierWaitMs }
    const handoffWaitMs = next.handoffs.waitMs(shardId, (nodeId) => this.host.leaseFrom(nodeId), this.host.leaseMs, now)
    if (handoffWaitMs !== null) return { granted: false, reason: 'handoff_pending', retryAfterMs: handoffWaitMs }
    return grant()
  }

  /**
   * Starts a live reshard to `totalShards`: the next set is planned over the live nodes and every plan
   * carries it under a new generation. Refused: a shard count the rules forbid (400), a reshard, a restart
   * barrier or a retired set some node may still run (409), a daily budget below N (409).
   */
  start(now: number, totalShards: number, remainingBudget: number | null): ReshardStarted {
    const { settings } = this.host
    assertReshardAllowed(settings, totalShards, {
      live: this.next === null ? null : this.next.totalShards,
      barrier: this.barrier !== null,
      remainingBudget,
      outdated: this.outdatedNodes(4),
    })
    this.assertNothingRetiredRuns(now)
    const from = settings.totalShards
    const next = this.newNextSet(totalShards, from, this.host.generation + 1)
    next.plan.adopt(next.plan.next())
    this.next = next
    const generation = this.host.advanceGeneration()
    this.host.emit({ kind: 'reshard_started', fromTotalShards: from, toTotalShards: totalShards, generation })
    this.host.markDurable()
    return { from, to: totalShards, generation }
  }

  /** Aborts the live reshard: its next set is dropped under a new generation (nodes stop its shards). */
  abort(): ReshardStarted {
    const next = this.next
    if (next === null) throw new AppError('not_found', 'no live reshard is in progress')
    this.next = null
    this.lastEnd = { outcome: 'aborted', totalShards: next.totalShards }
    const generation = this.host.advanceGeneration()
    this.retire(next.totalShards, generation)
    this.host.emit({ kind: 'reshard_aborted', fromTotalShards: next.fromTotalShards, toTotalShards: next.totalShards, generation, reason: 'operator' })
    this.host.markDurable()
    return { from: next.fromTotalShards, to: next.totalShards, generation }
  }

  /**
   * The switch, once every next-set shard is reported running: the next set becomes the plan under a new
   * generation; nodes stop their old-set shards (no session deposit) and keep the next-set ones.
   */
  switchIfComplete(): void {
    const next = this.next
    if (next === null || !next.complete()) return
    const from = this.host.settings.totalShards
    this.host.adoptNextSet(next)
    this.next = null
    this.lastEnd = { outcome: 'switched', totalShards: next.totalShards }
    const generation = this.host.advanceGeneration()
    this.retire(from, generation)
    this.host.emit({ kind: 'reshard_switched', fromTotalShards: from, toTotalShards: next.totalShards, generation })
    this.host.markDurable()
  }

  /** The operator's view of a reshard in progress (live, or the restart barrier), or null. */
  view(): ReshardView | null {
    const next = this.next
    if (next !== null) {
      return {
        phase: 'identifying',
        fromTotalShards: this.host.settings.totalShards,
        totalShards: next.totalShards,
        generation: next.startedAt,
        readyShards: next.readyTotal,
        unassigned: next.plan.unassigned,
        pendingHandoffs: next.handoffs.pendingTotal(),
      }
    }
    if (this.barrier !== null) {
      return { phase: 'restart_barrier', totalShards: this.host.settings.totalShards, generation: this.barrier.generation, waitingNodes: this.barrier.waitingFor.length }
    }
    return null
  }

  /** A node's part of the next set in the operator's view, or null without a live reshard. */
  nodeView(nodeId: string): { rangeStart: number; rangeCount: number; readyShards: number } | null {
    const next = this.next
    return next === null ? null : { ...next.rangeOf(nodeId), readyShards: next.readyOf(nodeId) }
  }

  /** What the state's meta keeps of the reshards. */
  meta(): { reshard: StateMeta['reshard']; liveReshard?: PersistedLiveReshard; retired?: StateMeta['retired'] } {
    const reshard = this.barrier === null ? null : { generation: this.barrier.generation, waitingFor: this.barrier.waitingFor }
    const liveReshard = this.next === null ? undefined : persistedLiveReshard(this.next, this.host.nodes)
    const retired = this.retired === null ? undefined : { totalShards: this.retired.totalShards, generation: this.retired.barrier.generation, waitingFor: this.retired.barrier.waitingFor }
    return { reshard, ...(liveReshard === undefined ? {} : { liveReshard }), ...(retired === undefined ? {} : { retired }) }
  }

  /** Drops a restart barrier nobody is waited for any more; true when it did. */
  settleBarrier(): boolean {
    if (this.barrier === null || this.barrier.active) return false
    this.barrier = null
    this.host.markDurable()
    return true
  }

  /** The set `totalShards` retired at `generation` may still run on every node that may run anything. */
  private retire(totalShards: number, generation: number): void {
    const waiting = [...this.host.live.keys(), ...this.host.revokedNames()]
    this.retired = waiting.length === 0 ? null : { totalShards, barrier: new ReshardBarrier(generation, waiting) }
  }

  private settleRetired(): boolean {
    if (this.retired === null || this.retired.barrier.active) return false
    this.retired = null
    this.host.markDurable()
    return true
  }

  /** Refuses a new reshard while some node may still run a shard of the set the last abort or switch retired. */
  private assertNothingRetiredRuns(now: number): void {
    const retired = this.retired
    if (retired === null) return
    const waiting = retired.barrier.waitingFor
    const retryAfterMs = reshardWaitMs(retired.barrier, (nodeId) => this.host.leaseFrom(nodeId), this.host.leaseMs, now)
    throw new AppError(
      'reshard_in_progress',
      `${waiting.length === 1 ? 'node' : 'nodes'} ${waiting.slice(0, 3).join(', ')}${waiting.length > 3 ? ` and ${waiting.length - 3} more` : ''} ` +
        `may still run shards of the ${retired.totalShards}-shard set that the last reshard retired at generation ${retired.barrier.generation}: ` +
        `a new reshard waits until they report it (their next check-in) or their lease runs out (at most ${Math.ceil(retryAfterMs / 1000)} s)`,
      { retry_after_ms: retryAfterMs },
      { 'retry-after': String(Math.ceil(retryAfterMs / 1000)) },
    )
  }

  /** Up to `max` live nodes whose agent has not shown it knows live resharding, in byte order. */
  private outdatedNodes(max: number): string[] {
    const out: string[] = []
    for (const record of this.host.live.values()) if (!record.knowsNext) out.push(record.nodeId)
    return out.sort(compareBytes).slice(0, max)
  }

  /** A next set over the live nodes, planned with the deployment's planner. */
  private newNextSet(totalShards: number, from: number, startedAt: number): NextSet {
    const { settings, nodes, live, draining } = this.host
    return new NextSet(totalShards, from, startedAt, nodes, live, draining, plannerFor(settings.planner), settings.planner === 'stable', () => this.host.markDurable())
  }
}

