/**
 * Runs the pure core with the real clock: every operation reads the clock once, then forwards the
 * core's events to the audit log and hands a snapshot to the state store when persistent state moved.
 */
import type { Controller } from '../core/controller.js'
import type { CheckinBody, IdentifyBody } from '../core/schemas.js'
import type {
  CertRef,
  CheckinOutcome,
  ControllerSnapshot,
  CoreEvent,
  DrainOutcome,
  IdentifyOutcome,
  PlanView,
  RouteOutcome,
} from '../core/types.js'
import type { AuditSink } from './audit-sink.js'
import { DurableWriter, type DurableWriterOptions } from './durable-writer.js'

export interface ServiceDeps {
  readonly now: () => number
  readonly audit: AuditSink
  /** Saves a snapshot durably; called with the latest state, one call at a time. Without it nothing persists. */
  readonly persist?: (snapshot: ControllerSnapshot) => Promise<void>
  /** Failure reporting and retry pacing of the state writes. */
  readonly writes?: Omit<DurableWriterOptions, 'write'>
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
    case 'node_rotated':
      return audit.record('identity_rotated', { node_id: event.nodeId, from_serial: event.fromSerial, to_serial: event.toSerial })
    case 'reshard':
      return audit.record('reshard', {
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
      })
  }
}

/** The controller as the HTTP layer and the process see it. */
export class ControllerService {
  private persistedVersion: number
  private readonly writer: DurableWriter

  constructor(
    private readonly controller: Controller,
    private readonly deps: ServiceDeps,
  ) {
    this.persistedVersion = controller.persistVersion
    const persist = deps.persist
    this.writer = new DurableWriter({
      ...deps.writes,
      write: persist === undefined ? () => Promise.resolve() : () => persist(this.controller.snapshot()),
    })
  }

  /**
   * Runs one request's core operation, then flushes its events and persists when needed (also on
   * errors). While state cannot be made durable, nothing starts: 503 `unavailable`.
   */
  private run<T>(op: (now: number) => T): T {
    this.writer.assertAvailable()
    return this.runAlways(op)
  }

  /** As run, also while writes fail (timers: expiry and revocation must go on). */
  private runAlways<T>(op: (now: number) => T): T {
    try {
      return op(this.deps.now())
    } finally {
      this.flush()
    }
  }

  /** Forwards pending core events to the audit log and persists a changed state. */
  flush(): void {
    for (const event of this.controller.drainEvents()) auditCoreEvent(this.deps.audit, event)
    if (this.controller.persistVersion !== this.persistedVersion) {
      this.persistedVersion = this.controller.persistVersion
      this.writer.changed() // the snapshot is taken when the write starts, not per change
    }
  }

  /**
   * Resolves once every state change made so far is durable. Answers wait for it, so no node is
   * ever told a generation that a crash could take back (a restart must not roll it back); if the
   * write fails it rejects with 503 `unavailable`.
   */
  durable(): Promise<void> {
    return this.writer.whenDurable()
  }

  /** Why state is not durable right now (a failed write not yet healed by a retry), or null. */
  get durabilityProblem(): string | null {
    return this.writer.failure?.message ?? null
  }

  /** At stop: writes the latest state one last time; throws if it cannot be made durable. */
  flushFinal(): Promise<void> {
    return this.writer.flushFinal()
  }

  /** A check-in (body validated and bound to the certificate); `identity_conflict` is audited by the caller. */
  checkIn(body: CheckinBody, cert: CertRef): CheckinOutcome {
    return this.run((now) => this.controller.checkIn(now, body, cert))
  }

  /** An Identify claim; `not_owner` is audited by the caller (limited per principal). */
  claimIdentify(body: IdentifyBody): IdentifyOutcome {
    return this.run((now) => this.controller.claimIdentify(now, body))
  }

  route(guildId: string): RouteOutcome {
    return this.run((now) => this.controller.route(now, guildId))
  }

  plan(): PlanView {
    return this.run((now) => this.controller.plan(now))
  }

  setDraining(nodeId: string, draining: boolean, operator: string): DrainOutcome {
    const outcome = this.run((now) => this.controller.setDraining(now, nodeId, draining))
    this.deps.audit.record('drain_set', { node_id: nodeId, draining, operator, generation: outcome.generation })
    return outcome
  }

  /** Removes live nodes whose certificate is revoked; returns their IDs. */
  removeRevoked(isRevoked: (serial: string) => boolean): string[] {
    return this.runAlways((now) => this.controller.removeRevoked(now, isRevoked))
  }

  /** Expires nodes whose lease ran out (also run on a timer so idle controllers expire too). */
  expireStaleNodes(): string[] {
    return this.runAlways((now) => this.controller.expireStaleNodes(now))
  }

  snapshot(): ControllerSnapshot {
    return this.controller.snapshot()
  }
}
