/**
 * The controller's operations side in one place, so runtime.ts only plugs it in: the metrics (made
 * first, because the state writer, the TLS server and the auth hook report into them), the readiness
 * checks, and the ops listener started once the rest of the controller exists.
 */
import { X509Certificate } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import type { OpsConfig } from '../config.js'
import { hostForUrl } from '../net/host.js'
import type { ParsedCrl } from '../identity/crl.js'
import type { ControllerService } from '../service/controller-service.js'
import type { TlsServer } from '../server/tls-server.js'
import { ControllerMetrics } from './metrics.js'
import { OpsServer } from './ops-server.js'
import { evaluateReadiness, type Readiness, type ReadinessCheck } from './readiness.js'
import { installRequestMetrics } from './request-metrics.js'

/** What the ops side reads from the running controller (read-only). */
export interface OperationsSources {
  readonly service: Pick<ControllerService, 'figures' | 'durabilityProblem'>
  readonly tls: Pick<TlsServer, 'caps' | 'openConnections' | 'handshakesInFlight' | 'admission'>
  /** The mTLS fastify app: its requests are counted and its listener is a readiness check. */
  readonly app: FastifyInstance
  /** The CRL in force now (it changes when the watcher loads a new one). */
  readonly crl: () => ParsedCrl
  /** The mTLS server certificate (PEM). */
  readonly serverCertPem: string
  readonly wallClock: () => number
  /** HA: whether this replica leads (default: always; a standalone controller serves). */
  readonly isLeader?: (() => boolean) | undefined
  /** The enrollment queue (its figures; absent: zeros). */
  readonly enroll?: { figures(): { pending: number; held: number } } | undefined
  /** More readiness checks (HA adds one answering `not_leader`). */
  readonly readinessChecks?: readonly ReadinessCheck[] | undefined
}

/** Metrics, readiness and the ops listener of one controller. */
export class Operations {
  /** Every metric; hand its hooks to the parts that report into it. */
  readonly metrics: ControllerMetrics
  private checks: readonly ReadinessCheck[] = []
  private stopping = false
  private server: OpsServer | null = null

  /** @param settings the deployment's total shards and daily Identify budget (null: none) */
  constructor(settings: { readonly totalShards: number; readonly dailyIdentifyLimit: number | null }) {
    this.metrics = new ControllerMetrics(settings)
  }

  /** Connects metrics and readiness to the controller, then listens (unless `config` is null). */
  async start(config: OpsConfig | null, sources: OperationsSources, logger?: Logger): Promise<void> {
    const { service, tls, app, crl, wallClock } = sources
    const certExpiry = new Date(new X509Certificate(sources.serverCertPem).validTo)
    this.checks = [
      () => (service.durabilityProblem === null ? null : 'state_not_durable'),
      () => {
        const nextUpdate = crl().nextUpdate
        return nextUpdate !== null && nextUpdate.getTime() < wallClock() ? 'crl_past_next_update' : null
      },
      () => (app.server.listening ? null : 'mtls_listener_down'),
      () => (this.stopping ? 'stopping' : null),
      ...(sources.readinessChecks ?? []),
    ]
    installRequestMetrics(app, this.metrics)
    this.metrics.bind({
      figures: () => service.figures(),
      readiness: () => this.readiness(),
      isLeader: sources.isLeader ?? (() => true),
      crlNextUpdate: () => crl().nextUpdate,
      serverCertExpiry: () => certExpiry,
      refusedConnections: () => tls.caps.refused,
      openConnections: () => tls.openConnections,
      admission: () => ({ deferred: tls.admission.deferred, costMs: tls.admission.estimatedCostMs, inFlight: tls.handshakesInFlight, loopUtilization: tls.admission.loopUtilization }),
      enroll: () => sources.enroll?.figures() ?? { pending: 0, held: 0 },
    })
    if (config === null) return
    this.server = await OpsServer.start(config.host, config.port, { metrics: this.metrics, readiness: () => this.readiness(), ...(logger ? { logger } : {}) })
    logger?.info({ host: config.host, port: this.server.port }, `ops endpoint listening on ${hostForUrl(config.host)}:${this.server.port} (plain HTTP: GET /metrics, /healthz, /readyz)`)
  }

  /** Whether the controller can serve nodes correctly now, and if not why. */
  readiness(): Readiness {
    return evaluateReadiness(this.checks)
  }

  /** A graceful stop began: /readyz says `stopping` from now on. */
  markStopping(): void {
    this.stopping = true
  }

  /** The ops listener's port, or null when it is turned off. */
  get port(): number | null {
    return this.server?.port ?? null
  }

  /** Closes the ops listener (last, so probes see `stopping` while the controller drains). */
  async close(): Promise<void> {
    await this.server?.close()
    this.server = null
  }
}
