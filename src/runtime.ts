/**
 * Starts a controller from a validated Config: material (TLS files, CRL, plan keys) → state backend →
 * audit log and ops → the service → mTLS transport → listen → CRL watcher and lease timer. Used by
 * main.ts and by the e2e tests.
 */
import { readFile } from 'node:fs/promises'
import { X509Certificate, type KeyObject } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { buildApp } from './app.js'
import { assertPrivateKeyFile, type Config, type EnrollConfig } from './config.js'
import { AuditLog } from './audit/audit-log.js'
import { PeerAuditLimiter, type PeerAuditLimits } from './audit/peer-audit-limiter.js'
import { CrlEnforcement } from './identity/crl-enforcement.js'
import type { ParsedCrl } from './identity/crl.js'
import { loadInitialCrl, startupCrlWarning } from './identity/crl-startup.js'
import { CrlPush } from './service/crl-push.js'
import { TlsServer, type TlsServerDeps } from './server/tls-server.js'
import { SharedTicketKeys, type TicketKeyStoreAccess } from './server/shared-ticket-keys.js'
import { TicketSealKey } from './server/ticket-key-seal.js'
import { TicketKeys } from './server/ticket-keys.js'
import { PrincipalRateLimiter } from './http/principal-rate-limiter.js'
import type { Role } from './identity/principal.js'
import { expectationHandler } from './http/early-answers.js'
import type { ControllerService } from './service/controller-service.js'
import type { ServiceHost, StateBackend } from './service/service-host.js'
import { closeGracefully } from './server/graceful-close.js'
import { HTTP_LIMITS } from './server/http-limits.js'
import { Operations } from './ops/operations.js'
import { loadPlanKeys } from './signing/plan-keys.js'
import { PlanSigner } from './signing/plan-signer.js'
import { openFileBackend } from './backends/file-backend.js'
import { CloserStack } from './closer-stack.js'
import { ProofSeal } from './service/proof-seal.js'
import { enrollLimits, type EnrollHost } from './service/enroll-host.js'
import { EnrollServer } from './server/enroll-server.js'
import { buildEnrollApp } from './http/enroll-app.js'
import type { StateStore } from './state/state-store.js'

export interface RunningController {
  readonly app: FastifyInstance
  readonly port: number
  /** The service side: the state backend's host (HA: one service per leadership term). */
  readonly host: ServiceHost
  /** The service serving now; throws in an HA replica that does not lead. */
  readonly service: ControllerService
  readonly tls: TlsServer
  /** The ops endpoint's port, or null when `ops` is turned off. */
  readonly opsPort: number | null
  /** The enrollment listener's port, or null when `enroll` is not configured. */
  readonly enrollPort: number | null
  /** Graceful stop: stop accepting, finish requests in flight (cut after the grace period), persist, audit. */
  stop(): Promise<void>
}

export interface RuntimeOptions {
  readonly logger?: Logger
  /** Period of the CRL file check and of lease expiry (ms). */
  readonly tickMs?: number
  /** Wraps the file state store (fault-injection tests: a store that fails on demand around the real one). */
  readonly wrapStore?: (store: StateStore) => StateStore
  /** Audit limits for peer-triggered events (tests that count such lines raise them). */
  readonly peerAuditLimits?: PeerAuditLimits
  /** Admission settings under a reconnect storm (tests that provoke a deferral set tiny ones). */
  readonly admission?: TlsServerDeps['admission']
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

/** The file store (the default) or, with `ha`, etcd: opened before anything is written. */
async function openBackend(config: Config, material: Material, opts: RuntimeOptions): Promise<StateBackend & { readonly ticketKeyStore?: TicketKeyStoreAccess }> {
  const crl = material.crl
  if (config.ha !== null) {
    // Loaded only in HA mode: the etcd client (grpc-js inside) costs ~0.4 s of CPU to load, which every
    // start on the file store (and every test process) would otherwise pay for nothing.
    const { openHaBackend } = await import('./backends/ha-backend.js')
    return openHaBackend({ ha: config.ha, controllerId: config.controllerId, stateDir: config.stateDir, crlPath: config.tls.crl, crl }, opts.logger)
  }
  if (config.stateDir === null) throw new Error('key "state_dir": is required without "ha"') // the config schema says so too
  return openFileBackend(config.stateDir, { crl, path: config.tls.crl, ca: material.ca }, opts.wrapStore)
}

/** The files a controller serves with, read and checked before anything is opened. */
interface Material {
  readonly caPem: string
  readonly certPem: string
  readonly keyPem: string
  readonly ca: X509Certificate
  /** The `tls.crl` file as read, and its CRL. */
  readonly crlPem: string
  readonly crl: ParsedCrl
  readonly signer: PlanSigner
  /** The plan-signing key (HA: the shared ticket keys are sealed under a key derived from it). */
  readonly planPrivateKey: KeyObject
}

/** Reads the TLS files, the CRL (verified under the CA) and the plan keys; refuses loose private keys. */
async function loadMaterial(config: Config): Promise<Material> {
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
  const planKeys = await loadPlanKeys(config.planKeys)
  return { caPem, certPem, keyPem, ca, crlPem, crl, signer: new PlanSigner(planKeys), planPrivateKey: planKeys.privateKey }
}

/** What the enrollment listener is made of. */
interface EnrollListenerParts {
  readonly cert: string
  readonly key: string
  readonly limits: Config['limits']
  readonly enroll: EnrollHost
  readonly peerAudit: PeerAuditLimiter
  readonly now: () => number
  readonly logger?: Logger | undefined
}

/** Starts the enrollment listener (TLS, no client certificate, two routes); returns its port. */
async function startEnrollListener(config: EnrollConfig, parts: EnrollListenerParts, closers: CloserStack): Promise<number> {
  const server = new EnrollServer({ cert: parts.cert, key: parts.key, connectionLimits: { perAddress: parts.limits.maxConnectionsPerAddress, total: parts.limits.maxConnections }, peerAudit: parts.peerAudit })
  const app = await buildEnrollApp({
    enroll: parts.enroll,
    peerAudit: parts.peerAudit,
    rateLimiter: new PrincipalRateLimiter<'enroll'>({ enroll: config.perAddress }, parts.now),
    ...(parts.logger === undefined ? {} : { logger: parts.logger }),
    serverFactory: server.factory,
  })
  await app.listen({ host: config.host, port: config.port, backlog: HTTP_LIMITS.listenBacklog, listenTextResolver: (address) => `enrollment listener at ${address.replace(/^http:/, 'https:')} (TLS, no client certificate)` })
  closers.push('the enrollment listener', async () => {
    const cut = await closeGracefully(app, DEFAULT_STOP_GRACE_MS, () => server.openConnections)
    if (cut > 0) server.destroyAll()
  })
  const address = app.server.address()
  return typeof address === 'object' && address ? address.port : config.port
}

/** What the stop reports in its audit line, filled in by the closers as they run. */
interface StopReport {
  started: boolean
  generation: number | null
  connectionsCut: number
}

/**
 * Starts the controller and returns once it listens. A composition root, in the order things are built:
 * material → state backend → audit and ops → the service → the transport (TLS server, app) → listen →
 * timers. Each part pushes its closer as it is built, so a failed start releases what it had built and
 * stop() releases everything in reverse order.
 */
export async function startController(config: Config, opts: RuntimeOptions = {}): Promise<RunningController> {
  const closers = new CloserStack()
  try {
    return await buildController(config, opts, closers)
  } catch (err) {
    await closers.closeAll().catch(() => undefined) // the start's own error is the one to report
    throw err
  }
}

async function buildController(config: Config, opts: RuntimeOptions, closers: CloserStack): Promise<RunningController> {
  const { logger } = opts
  const tickMs = opts.tickMs ?? 1000
  const material = await loadMaterial(config)
  // A damaged state file or journal, or a CRL older than the last one in force, stops the start here,
  // before anything is written; so does an unreadable etcd client certificate or key.
  const backend = await openBackend(config, material, opts)
  // The file's CRL, or a pushed copy kept by the backend that is newer (POST /v1/crl).
  const startingCrl = backend.startingCrl.crl
  if (backend.startingCrl.pushed) {
    logger?.info({ crlNumber: startingCrl.crlNumber?.toString() ?? null, fileCrlNumber: material.crl.crlNumber?.toString() ?? null }, 'starting with the CRL pushed with POST /v1/crl: it is newer than the "tls.crl" file, which is ignored until it holds a newer CRL')
  }

  const report: StopReport = { started: false, generation: null, connectionsCut: 0 }
  const ops = new Operations(config.settings)
  closers.push('the ops endpoint', () => ops.close())
  const audit = await AuditLog.open(config.auditLog)
  closers.push('the audit log', async () => {
    if (report.started) audit.record('controller_stop', { controller_id: config.controllerId, generation: report.generation, connections_cut: report.connectionsCut })
    await audit.close()
  })
  // Sessions from before a restart resume (unless the CRL changed meanwhile): no full-handshake storm.
  // HA: state_dir is never written; the replicas share their keys through etcd, sealed, so that sessions
  // also resume on the replica that takes over (server/shared-ticket-keys.ts).
  const ticketKeys =
    config.ha === null || backend.ticketKeyStore === undefined
      ? await TicketKeys.open(config.ha === null ? config.stateDir : null, { crlPem: startingCrl.pem, logger })
      : await SharedTicketKeys.open({
          store: backend.ticketKeyStore,
          seal: TicketSealKey.derive(material.planPrivateKey, config.ha.prefix),
          crlPem: startingCrl.pem,
          logger,
        })
  closers.push('the ticket keys', () => ticketKeys.close())
  const now = monotonicEpochClock()
  // The operational log mirrors these audit lines with the same limits (a flood must not fill either).
  const peerAudit = new PeerAuditLimiter(audit, now, opts.peerAuditLimits ?? DEFAULT_PEER_AUDIT_LIMITS, (event, fields) =>
    logger?.warn(fields, `refused: ${event}`),
  )
  const crls = new CrlEnforcement(startingCrl, {
    path: config.tls.crl,
    ca: material.ca,
    intervalMs: tickMs,
    audit,
    logger,
    ...(backend.startingCrl.pushed ? { fileJudgedAtStart: material.crlPem } : {}),
  })
  const isRevoked = crls.isRevoked

  // Serving starts here (HA: campaigning); restored nodes whose certificate was revoked meanwhile are removed.
  const host = backend.start({
    settings: config.settings,
    now,
    audit,
    logger,
    isRevoked,
    crlInForce: () => crls.inForce,
    offerCrl: (pem, origin) => crls.offer(pem, origin),
    timeStateWrite: (write) => ops.metrics.timeStateWrite(write),
    observeReplan: (seconds) => ops.metrics.observeReplan(seconds),
  })
  const generation = () => host.current()?.figures().generation ?? null
  closers.push('the state', async () => {
    report.generation = generation()
    await host.stop() // the last state write; HA: steps down
  })

  // Enrollment and renewal (SPEC "Device enrollment and renewal"): the queue lives where the state lives.
  const enrollConfig = config.enroll
  const enroll = await backend.openEnroll({
    now,
    audit,
    sealer: ProofSeal.derive(material.planPrivateKey, config.ha?.prefix ?? 'state_dir'),
    caPem: material.caPem,
    planJwks: () => material.signer.jwks,
    ...(enrollConfig === null ? {} : { limits: enrollLimits(enrollConfig.perAddressPending, enrollConfig.perTokenPending), pollAfterMs: enrollConfig.pollAfterMs }),
  })

  const authDeps = {
    isRevoked,
    wallClock: Date.now,
    audit,
    peerAudit,
    rateLimiter: new PrincipalRateLimiter(config.limits.rate, now),
    onRateLimited: (role: Role) => ops.metrics.rateLimited(role),
  }
  const tls = new TlsServer({ ca: material.caPem, cert: material.certPem, key: material.keyPem, crlPem: startingCrl.pem }, {
    logger,
    ticketKeys,
    peerAudit,
    connectionLimits: { perAddress: config.limits.maxConnectionsPerAddress, total: config.limits.maxConnections },
    onUnmetExpectation: expectationHandler(authDeps),
    onHandshakeFailure: (code) => ops.metrics.handshakeFailed(code),
    onHandshakeDone: (seconds) => ops.metrics.handshakeDone(seconds),
    isServing: () => host.isLeader(),
    ...(opts.admission ? { admission: opts.admission } : {}),
  })
  const crlPush = new CrlPush({ crls, store: host.crlStore, logger })
  const certOnRecord = (nodeId: string) => host.current()?.certSerialOf(nodeId) ?? null
  const app = await buildApp({ ...authDeps, crlPush, enroll, certOnRecord, service: host.api, signer: material.signer, controllerId: config.controllerId, logger, serverFactory: tls.factory })

  // The ops endpoint comes up first: until the mTLS listener is up, /readyz says so; an HA replica is
  // ready (and pxe_is_leader 1) only while it leads with its state loaded.
  const isLeader = () => host.isLeader()
  await ops.start(config.ops, { service: host, tls, app, enroll, crl: () => crls.inForce, serverCertPem: material.certPem, wallClock: Date.now, isLeader, readinessChecks: [() => (isLeader() ? null : 'not_leader')] }, logger)
  await app.listen({
    host: config.listen.host,
    port: config.listen.port,
    backlog: HTTP_LIMITS.listenBacklog,
    // fastify cannot tell that a factory-made server speaks TLS and would log "http://".
    listenTextResolver: (address) => `server listening at ${address.replace(/^http:/, 'https:')} (mutual TLS)`,
  })
  closers.push('the mTLS listener', async () => {
    tls.destroyUnverified() // sockets still in (or stuck before) their handshake: app.close() cannot see them
    report.connectionsCut = await closeGracefully(app, DEFAULT_STOP_GRACE_MS, () => tls.openConnections)
    if (report.connectionsCut > 0) logger?.warn({ connections: report.connectionsCut, graceMs: DEFAULT_STOP_GRACE_MS }, 'stop: requests still in flight after the grace period; their connections were closed')
    peerAudit.flushSuppressed(true) // what open windows held back is still reported
  })

  const enrollPort = enrollConfig === null ? null : await startEnrollListener(enrollConfig, { cert: material.certPem, key: material.keyPem, limits: config.limits, enroll, peerAudit, now, logger }, closers)

  crls.start({
    installTls: (pem) => tls.updateCrl(pem),
    dropRevoked: (revoked) => ({
      closedConnections: tls.closeConnections((p) => revoked(p.serial)),
      removedNodes: host.current()?.removeRevoked(revoked) ?? [],
    }),
    recordCrlNumber: (crlNumber) => host.current()?.recordCrlNumber(crlNumber), // persisted with the state
  })
  closers.push('the CRL watcher', () => crls.stop())
  host.crlStore.follow?.() // HA: the cluster's pushed CRL, from now on offered as it changes
  ticketKeys.startTimer((keys) => tls.installTicketKeys(keys))
  // HA: stop following the cluster's record before the state closer closes the etcd client (the
  // closer above, run later, then finds it closed already).
  if (ticketKeys instanceof SharedTicketKeys) closers.push('the shared ticket keys', () => ticketKeys.close())
  const crlWarning = startupCrlWarning(startingCrl, Date.now())
  if (crlWarning !== null) logger?.warn(crlWarning)
  const tick = setInterval(() => {
    host.current()?.expireStaleNodes()
    peerAudit.flushSuppressed()
  }, tickMs)
  tick.unref()
  closers.push('the lease timer', () => clearInterval(tick))
  closers.push('readiness', () => ops.markStopping()) // first at a stop: /readyz answers 503 from then on

  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : config.listen.port
  audit.record('controller_start', { controller_id: config.controllerId, host: config.listen.host, port, generation: generation(), restored: backend.restored, ha: config.ha !== null })
  report.started = true
  return {
    app,
    port,
    host,
    get service(): ControllerService {
      const service = host.current()
      if (service === null) throw new Error('no controller serves in this replica (HA: not the leader)')
      return service
    },
    tls,
    opsPort: ops.port,
    enrollPort,
    stop: () => closers.closeAll(),
  }
}
