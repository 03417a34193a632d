/**
 * Starts a controller from a validated Config: files → CRL, plan keys, audit log, state → core →
 * mTLS app → listen, plus the CRL watcher and the lease timer. Used by main.ts and by the e2e tests.
 */
import { readFile } from 'node:fs/promises'
import { X509Certificate } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { buildApp } from './app.js'
import { assertPrivateKeyFile, type Config } from './config.js'
import { AuditLog } from './audit/audit-log.js'
import { PeerAuditLimiter, type PeerAuditLimits } from './audit/peer-audit-limiter.js'
import { Controller } from './core/controller.js'
import { CrlEnforcement } from './identity/crl-enforcement.js'
import { assertNotRolledBack, loadInitialCrl, startupCrlWarning } from './identity/crl-startup.js'
import { TlsServer } from './server/tls-server.js'
import { TicketKeys } from './server/ticket-keys.js'
import { PrincipalRateLimiter } from './http/principal-rate-limiter.js'
import type { Role } from './identity/principal.js'
import { expectationHandler } from './http/early-answers.js'
import { ControllerService } from './service/controller-service.js'
import { closeGracefully } from './server/graceful-close.js'
import { Operations } from './ops/operations.js'
import type { ReadinessCheck } from './ops/readiness.js'
import { loadPlanKeys } from './signing/plan-keys.js'
import { PlanSigner } from './signing/plan-signer.js'
import { JournaledFileStore } from './state/journaled-file-store.js'
import type { DeltaStateStore } from './state/state-store.js'

export interface RunningController {
  readonly app: FastifyInstance
  readonly port: number
  readonly service: ControllerService
  readonly tls: TlsServer
  /** The ops endpoint's port, or null when `ops` is turned off. */
  readonly opsPort: number | null
  /** Graceful stop: stop accepting, finish requests in flight (cut after the grace period), persist, audit. */
  stop(): Promise<void>
}

export interface RuntimeOptions {
  readonly logger?: Logger
  /** Period of the CRL file check and of lease expiry (ms). */
  readonly tickMs?: number
  /** Wraps the state store (fault-injection tests: a store that fails on demand around the real one). */
  readonly wrapStore?: (store: DeltaStateStore) => DeltaStateStore
  /** Audit limits for peer-triggered events (tests that count such lines raise them). */
  readonly peerAuditLimits?: PeerAuditLimits
  /** HA: whether this replica leads (pxe_is_leader); a standalone controller always does. */
  readonly isLeader?: () => boolean
  /** HA: readiness checks besides the standard ones (e.g. one answering 'not_leader'). */
  readonly readinessChecks?: readonly ReadinessCheck[]
}

/** Requests in flight get this long to finish at a stop; every request must arrive within 10 s anyway. */
export const DEFAULT_STOP_GRACE_MS = 5_000

/** 5 lines a minute per peer and kind, then one summary: a flood cannot fill the disk. */
const DEFAULT_PEER_AUDIT_LIMITS: PeerAuditLimits = { maxPerWindow: 5, windowMs: 60_000, maxPeers: 1024, perEvent: { connection_refused: 1 } }

/** A clock that never runs backwards (leases must not jump with the wall clock), anchored at epoch ms. */
function monotonicEpochClock(): () => number {
  const anchor = Date.now() - performance.now()
  return () => Math.floor(anchor + performance.now())
}

/** Reads a file, naming the config key when it cannot be read. */
async function readConfigured(path: string, key: string): Promise<string> {
  try {
    return await readFile(path, 'utf8')
  } catch (err) {
    throw new Error(`key "${key}": cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
}

/** Starts the controller and returns once it listens. */
export async function startController(config: Config, opts: RuntimeOptions = {}): Promise<RunningController> {
  const { logger } = opts
  // Here, not only in loadConfig: every start (the development default included) passes through.
  await assertPrivateKeyFile(config.tls.key, 'tls.key')
  await assertPrivateKeyFile(config.planKeys, 'plan_keys')
  const [caPem, certPem, keyPem, crlPem] = await Promise.all([
    readConfigured(config.tls.ca, 'tls.ca'),
    readConfigured(config.tls.cert, 'tls.cert'),
    readConfigured(config.tls.key, 'tls.key'),
    readConfigured(config.tls.crl, 'tls.crl'),
  ])
  const ca = new X509Certificate(caPem)
  const crl = loadInitialCrl(crlPem, ca, config.tls.crl)
  const signer = new PlanSigner(await loadPlanKeys(config.planKeys))
  const files = new JournaledFileStore(config.stateDir)
  const store = opts.wrapStore?.(files) ?? files
  const state = await store.load() // a damaged state file or journal stops the start here, untouched
  assertNotRolledBack(crl, state?.meta.crlNumber ?? undefined, config.tls.crl) // so does a CRL older than the last one in force
  // Sessions from before a restart resume (unless the CRL changed meanwhile): no full-handshake storm.
  const ticketKeys = await TicketKeys.open(config.stateDir, { crlPem: crl.pem, logger })
  const audit = await AuditLog.open(config.auditLog)
  const ops = new Operations(config.settings)
  const now = monotonicEpochClock()
  // The operational log mirrors these audit lines with the same limits (a flood must not fill either).
  const peerAudit = new PeerAuditLimiter(audit, now, opts.peerAuditLimits ?? DEFAULT_PEER_AUDIT_LIMITS, (event, fields) =>
    logger?.warn(fields, `refused: ${event}`),
  )

  const controller = new Controller(config.settings, state ? { state, now: now() } : undefined)
  const service = new ControllerService(controller, {
    now,
    audit,
    store: { write: (delta, full, whole) => ops.metrics.timeStateWrite(() => store.write(delta, full, whole)) },
    writes: {
      onFailure: (err, consecutive) => {
        // Every failure while it lasts would flood the log: the first, then every 10th.
        if (consecutive === 1 || consecutive % 10 === 0) {
          logger?.error({ err: err.message, consecutive }, 'state write failed: answering 503 unavailable until a retry succeeds')
        }
      },
      onRecovered: (failedWrites) => logger?.warn({ failedWrites }, 'state write succeeded again: serving'),
    },
  })
  // The TLS server is made below: the watcher only calls into it after start().
  const crls = new CrlEnforcement(crl, {
    path: config.tls.crl,
    ca,
    intervalMs: opts.tickMs ?? 1000,
    audit,
    logger,
    installTls: (pem) => tls.updateCrl(pem),
    dropRevoked: (isRevoked) => ({
      closedConnections: tls.closeConnections((p) => isRevoked(p.serial)),
      removedNodes: service.removeRevoked(isRevoked),
    }),
    recordCrlNumber: (crlNumber) => {
      controller.recordCrlNumber(crlNumber)
      service.flush() // persists it
    },
  })
  const isRevoked = crls.isRevoked
  service.removeRevoked(isRevoked) // restored nodes whose certificate was revoked while we were down

  const authDeps = {
    isRevoked,
    wallClock: Date.now,
    audit,
    peerAudit,
    rateLimiter: new PrincipalRateLimiter(config.limits.rate, now),
    onRateLimited: (role: Role) => ops.metrics.rateLimited(role),
  }
  const tls: TlsServer = new TlsServer({ ca: caPem, cert: certPem, key: keyPem, crlPem: crl.pem }, {
    logger,
    ticketKeys,
    peerAudit,
    connectionLimits: { perAddress: config.limits.maxConnectionsPerAddress, total: config.limits.maxConnections },
    onUnmetExpectation: expectationHandler(authDeps),
    onHandshakeFailure: (code) => ops.metrics.handshakeFailed(code),
  })
  const app = await buildApp({
    ...authDeps,
    service,
    signer,
    controllerId: config.controllerId,
    logger,
    serverFactory: tls.factory,
  })

  // The ops endpoint comes up first: until the mTLS listener is up, /readyz says so.
  const { isLeader, readinessChecks } = opts
  await ops.start(config.ops, { service, tls, app, crl: () => crls.inForce, serverCertPem: certPem, wallClock: Date.now, isLeader, readinessChecks }, logger)
  try {
    await app.listen({
      host: config.listen.host,
      port: config.listen.port,
      // fastify cannot tell that a factory-made server speaks TLS and would log "http://".
      listenTextResolver: (address) => `server listening at ${address.replace(/^http:/, 'https:')} (mutual TLS)`,
    })
  } catch (err) {
    await ops.close()
    throw err
  }
  crls.start()
  ticketKeys.startTimer((keys) => tls.installTicketKeys(keys))
  const crlWarning = startupCrlWarning(crl, Date.now())
  if (crlWarning !== null) logger?.warn(crlWarning)
  const tick = setInterval(() => {
    service.expireStaleNodes()
    peerAudit.flushSuppressed()
  }, opts.tickMs ?? 1000)
  tick.unref()
  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : config.listen.port
  audit.record('controller_start', { controller_id: config.controllerId, host: config.listen.host, port, generation: controller.generation, restored: state !== null })

  let stopped = false
  return {
    app,
    port,
    service,
    tls,
    opsPort: ops.port,
    async stop() {
      if (stopped) return
      stopped = true
      ops.markStopping()
      crls.stop()
      clearInterval(tick)
      tls.destroyUnverified() // sockets still in (or stuck before) their handshake: app.close() cannot see them
      const cut = await closeGracefully(app, DEFAULT_STOP_GRACE_MS, () => tls.openConnections)
      if (cut > 0) logger?.warn({ connections: cut, graceMs: DEFAULT_STOP_GRACE_MS }, 'stop: requests still in flight after the grace period; their connections were closed')
      peerAudit.flushSuppressed(true) // what open windows held back is still reported
      await service.flushFinal()
      await store.close()
      await ticketKeys.close()
      audit.record('controller_stop', { controller_id: config.controllerId, generation: controller.generation, connections_cut: cut })
      await audit.close()
      await ops.close()
    },
  }
}
