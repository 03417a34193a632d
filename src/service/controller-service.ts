/**
 * Runs the pure core with the real clock: every operation reads the clock once, then forwards the
 * core's events to the audit log and hands a snapshot to the state store when persistent state moved.
 */
import { AppError } from '../errors.js'
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

export interface ServiceDeps {
  readonly now: () => number
  readonly audit: AuditSink
  /** Saves a fresh snapshot whenever persistent state changed; resolves once it is durable. */
  readonly persist?: (snapshot: ControllerSnapshot) => Promise<void>
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
  private saving: Promise<void> = Promise.resolve()

  constructor(
    private readonly controller: Controller,
    private readonly deps: ServiceDeps,
  ) {
    this.persistedVersion = controller.persistVersion
  }

  /** Runs one core operation, then flushes its events and persists when needed (also on errors). */
  private run<T>(op: (now: number) => T, onError?: (err: AppError) => void): T {
    try {
      return op(this.deps.now())
    } catch (err) {
      if (err instanceof AppError) onError?.(err)
      throw err
    } finally {
      this.flush()
    }
  }

  /** Forwards pending core events to the audit log and persists a changed state. */
  flush(): void {
    for (const event of this.controller.drainEvents()) auditCoreEvent(this.deps.audit, event)
    if (this.controller.persistVersion !== this.persistedVersion) {
      this.persistedVersion = this.controller.persistVersion
      const save = this.deps.persist?.(this.controller.snapshot())
      if (save) this.saving = save
    }
  }

  /**
   * Resolves once every state change made so far is durable. Answers wait for it, so no node is
   * ever told a generation that a crash could take back (a restart must not roll it back).
   */
  durable(): Promise<void> {
    return this.saving
  }

  checkIn(body: CheckinBody, cert: CertRef): CheckinOutcome {
    return this.run(
      (now) => this.controller.checkIn(now, body, cert),
      (err) => {
        if (err.code === 'identity_conflict') {
          this.deps.audit.record('identity_conflict', { node_id: body.node_id, serial: cert.serial, detail: err.message })
        }
      },
    )
  }

  claimIdentify(body: IdentifyBody): IdentifyOutcome {
    return this.run(
      (now) => this.controller.claimIdentify(now, body),
      (err) => {
        if (err.code === 'not_owner') this.deps.audit.record('not_owner', { node_id: body.node_id, shard_id: body.shard_id })
      },
    )
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
    return this.run((now) => this.controller.removeRevoked(now, isRevoked))
  }

  /** Expires nodes whose lease ran out (also run on a timer so idle controllers expire too). */
  expireStaleNodes(): string[] {
    return this.run((now) => this.controller.expireStaleNodes(now))
  }

  snapshot(): ControllerSnapshot {
    return this.controller.snapshot()
  }
}
