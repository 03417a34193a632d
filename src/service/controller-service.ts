/**
 * Runs the pure core with the real clock: every operation reads the clock once, then forwards the
 * core's events to the audit log and hands a snapshot to the state store when persistent state moved.
 */
import type { Controller } from '../core/controller.js'
import type { CheckinBody, IdentifyBody } from '../core/schemas.js'
import type {
  CertRef,
  CheckinOutcome,
  CoreEvent,
  DrainOutcome,
  IdentifyOutcome,
  PlanView,
  ReshardStarted,
  RouteOutcome,
} from '../core/types.js'
import type { AuditSink } from '../audit/audit-sink.js'
import type { StateStore } from '../state/state-store.js'
import { DurableWriter, type DurableWriterOptions } from './durable-writer.js'

export interface ServiceDeps {
  readonly now: () => number
  readonly audit: AuditSink
  /** Where state changes are made durable, one write at a time. Without it nothing persists. */
  readonly store?: Pick<StateStore, 'write'>
  /** Failure reporting and retry pacing of the state writes. */
  readonly writes?: Omit<DurableWriterOptions, 'write' | 'settle' | 'version' | 'needsSettle' | 'backlog'>
  /**
   * Told the main-thread time (s) of each core call that re-planned (a batch of joins, an expiry, a drain):
   * what a fleet's churn costs in planning, apart from the connections and requests around it.
   */
  readonly observeReplan?: (seconds: number) => void
}

/** Maps a core event to its audit line. */
function auditCoreEvent(audit: AuditSink, event: CoreEvent): void {
  switch (event.kind) {
    case 'generation_changed':
      return audit.record('plan_generation_changed', { from: event.from, to: event.to })
    case 'node_expired':
      return audit.record('node_expired', { node_id: event.nodeId, last_seen: new Date(event.lastSeen).toISOString() })
    case 'node_removed':
      return audit.record('node_removed', { node_id: event.nodeId, serial: event.serial, reason: event.reason })
    case 'node_left':
      return audit.record('node_left', { node_id: event.nodeId, serial: event.serial, sessions_deposited: event.sessions })
    case 'node_rotated':
      return audit.record('identity_rotated', { node_id: event.nodeId, from_serial: event.fromSerial, to_serial: event.toSerial })
    case 'reshard':
      return audit.record('reshard', {
        reason: event.reason,
        from_total_shards: event.fromTotalShards,
        to_total_shards: event.toTotalShards,
        from_max_concurrency: event.fromMaxConcurrency,
        to_max_concurrency: event.toMaxConcurrency,
        generation: event.generation,
        waiting_for_nodes: event.waitingFor,
      })
    case 'identify_granted':
      return audit.record('identify_granted', {
        node_id: event.nodeId,
        shard_id: event.shardId,
        bucket: event.bucket,
        generation: event.generation,
        ...(event.set === undefined ? {} : { set: event.set }),
      })
    // started and operator-aborted reshards are audited by the service, with the operator's name
    case 'reshard_started':
      return
    case 'reshard_switched':
      return audit.record('reshard_switched', { from_total_shards: event.fromTotalShards, to_total_shards: event.toTotalShards, generation: event.generation })
    case 'reshard_aborted':
      if (event.reason === 'operator') return
      return audit.record('reshard_aborted', { from_total_shards: event.fromTotalShards, to_total_shards: event.toTotalShards, generation: event.generation, reason: event.reason })
    // node and shard only: a session's ID, sequence and URL never reach the audit log
    case 'session_deposited':
      return audit.record('session_deposited', { node_id: event.nodeId, shard_id: event.shardId, generation: event.generation })
    case 'session_handed':
      return audit.record('session_handed', { node_id: event.nodeId, shard_id: event.shardId, generation: event.generation })
  }
}

/** What the routes call: a ControllerService, or (HA) a gate in front of the current leader's. */
export type ServiceApi = Pick<ControllerService, 'checkIn' | 'claimIdentify' | 'route' | 'plan' | 'setDraining' | 'startReshard' | 'abortReshard'>

/** The controller as the HTTP layer and the process see it. */
export class ControllerService {
  private readonly writer: DurableWriter

  constructor(
    private readonly controller: Controller,
    private readonly deps: ServiceDeps,
  ) {
    const store = deps.store
    this.writer = new DurableWriter({
      ...deps.writes,
      settle: () => {
        this.timed(() => this.controller.settle())
        this.flushEvents()
      },
      version: () => this.controller.persistVersion,
      needsSettle: () => this.controller.needsSettle,
      backlog: () => this.controller.pendingReports,
      // The delta is taken synchronously here: exactly the state the waiting answers were computed from.
      write:
        store === undefined
          ? () => {
              this.controller.takeDelta() // nothing to keep: the marks must not pile up
              return Promise.resolve()
            }
          : (whole, backlog) => store.write(this.controller.takeDelta(backlog), () => this.controller.snapshot(), whole),
    })
  }

  /**
   * Runs one request's core operation, then flushes its events (also on errors). While state cannot be
   * made durable, nothing starts: 503 `unavailable`.
   */
  private run<T>(op: (now: number) => T): T {
    this.writer.assertAvailable()
    return this.runAlways(op)
  }

  /** As run, also while writes fail (timers: expiry and revocation must go on). */
  private runAlways<T>(op: (now: number) => T): T {
    try {
      return this.timed(() => op(this.deps.now()))
    } finally {
      this.flush()
    }
  }

  /** Runs a core call; if it re-planned, its duration goes to observeReplan. */
  private timed<T>(call: () => T): T {
    const observe = this.deps.observeReplan
    if (observe === undefined) return call()
    const replans = this.controller.replans
    const start = performance.now()
    try {
      return call()
    } finally {
      if (this.controller.replans !== replans) observe((performance.now() - start) / 1000)
    }
  }

  /** Forwards pending core events to the audit log and starts a write if the state moved. */
  flush(): void {
    this.flushEvents()
    this.writer.kick()
  }

  private flushEvents(): void {
    for (const event of this.controller.drainEvents()) auditCoreEvent(this.deps.audit, event)
  }

  /**
   * The answer `compute` gives once the state it shows is durable (503 `unavailable` if the write fails);
   * `urgent` for an operator's change, released before waiting node answers (durable-writer.ts).
   */
  private answer<T>(compute: () => T, urgent = false): Promise<T> {
    return this.writer.answer(compute, this.controller.needsSettle, urgent)
  }

  /** Why state is not durable right now (a failed write not yet healed by a retry), or null. */
  get durabilityProblem(): string | null {
    return this.writer.failure?.message ?? null
  }

  /** This process may no longer write (HA: leadership ended): waiting answers get 503, nothing more is written. */
  abandon(): void {
    this.writer.abandon()
  }

  /** At stop: writes the latest state one last time; throws if it cannot be made durable. */
  flushFinal(): Promise<void> {
    return this.writer.flushFinal()
  }

  /**
   * A check-in (body validated and bound to the certificate); `identity_conflict` is audited by the caller.
   * Joins are re-planned together with the others that arrive during a write.
   */
  checkIn(body: CheckinBody, cert: CertRef): Promise<CheckinOutcome> {
    const registration = this.run((now) => this.controller.register(now, body, cert))
    return this.answer(() => this.controller.checkinOutcome(body.node_id, registration, this.deps.now()))
  }

  /**
   * An Identify claim; `not_owner` is audited by the caller (limited per principal). A grant's bucket
   * counts its interval from the moment the answer leaves (or fails), not from the decision: the node
   * IDENTIFYs when it reads the answer, and that may wait for a durable write (the daily budget).
   */
  claimIdentify(body: IdentifyBody, serial: string): Promise<IdentifyOutcome> {
    // Not async: a refusal (not_owner, identity_conflict, invalid_request) throws synchronously, which the route audits.
    const outcome = this.run((now) => this.controller.claimIdentify(now, body, serial))
    const answer = this.answer(() => outcome)
    if (!outcome.granted || outcome.mode !== 'identify') return answer
    return answer.finally(() => this.controller.identifyReleased(this.deps.now(), outcome.bucket))
  }

  route(guildId: string): Promise<RouteOutcome> {
    const outcome = this.run((now) => this.controller.route(now, guildId))
    return this.answer(() => outcome)
  }

  plan(): Promise<PlanView> {
    const view = this.run((now) => this.controller.plan(now))
    return this.answer(() => view)
  }

  async setDraining(nodeId: string, draining: boolean, operator: string, force = false): Promise<DrainOutcome> {
    const outcome = this.run((now) => this.controller.setDraining(now, nodeId, draining, force))
    this.deps.audit.record('drain_set', { node_id: nodeId, draining, operator, generation: outcome.generation, live: outcome.live })
    return this.answer(() => outcome, true)
  }

  /** POST /v1/reshard: starts a live reshard (refusals throw and change nothing); audited with the operator. */
  startReshard(totalShards: number, operator: string): Promise<ReshardStarted> {
    const outcome = this.run((now) => this.controller.startReshard(now, totalShards))
    this.deps.audit.record('reshard_started', { from_total_shards: outcome.from, to_total_shards: outcome.to, generation: outcome.generation, operator })
    return this.answer(() => outcome, true)
  }

  /** DELETE /v1/reshard: aborts the live reshard; audited with the operator. */
  abortReshard(operator: string): Promise<ReshardStarted> {
    const outcome = this.run((now) => this.controller.abortReshard(now))
    this.deps.audit.record('reshard_aborted', { from_total_shards: outcome.from, to_total_shards: outcome.to, generation: outcome.generation, reason: 'operator', operator })
    return this.answer(() => outcome, true)
  }

  /** Removes live nodes whose certificate is revoked; returns their IDs. */
  /** The serial of the certificate a live node's record holds, or null (renewals: only that one may renew). */
  certSerialOf(nodeId: string): string | null {
    return this.controller.certSerialOf(nodeId)
  }

  removeRevoked(isRevoked: (serial: string) => boolean): string[] {
    return this.runAlways((now) => this.controller.removeRevoked(now, isRevoked))
  }

  /** Expires nodes whose lease ran out (also run on a timer so idle controllers expire too). */
  expireStaleNodes(): string[] {
    return this.runAlways((now) => this.controller.expireStaleNodes(now))
  }

  /** Records an installed CRL's number in the state (persisted when it grows). */
  recordCrlNumber(crlNumber: bigint): void {
    this.runAlways(() => this.controller.recordCrlNumber(crlNumber))
  }

  /** Read-only figures for metrics, computed now. */
  figures(): {
    generation: number
    totalShards: number
    live: number
    draining: number
    unassigned: number
    dailyBudgetRemaining: number | null
    replans: number
    sessionsHeld: number
    restAllocatedPerSecond: number | null
    restDemandPerSecond: number | null
  } {
    const now = this.deps.now()
    const c = this.controller
    const rest = c.restBudget(now)
    return {
      generation: c.generation,
      totalShards: c.totalShards,
      ...c.counts(),
      dailyBudgetRemaining: c.dailyBudgetRemaining(now),
      replans: c.replans,
      sessionsHeld: c.sessionsHeld(now),
      restAllocatedPerSecond: rest?.allocatedPerSecond ?? null,
      restDemandPerSecond: rest?.demandPerSecond ?? null,
    }
  }
}
