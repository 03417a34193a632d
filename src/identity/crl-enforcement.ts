/**
 * The CRL in force in a running controller: the watcher wired to the TLS context, the open connections,
 * the node map, the CRL number recorded in the state and the audit log. Nothing here decides which CRL
 * wins (crl-decide.ts does); this file only carries the verdicts out, in a safe order.
 */
import type { X509Certificate } from 'node:crypto'
import type { Logger } from 'pino'
import type { ParsedCrl } from './crl.js'
import { CrlWatcher, type CrlRefusalDetails, type CrlRefusalReason } from './crl-watcher.js'

/** The audit events this file writes. */
type CrlAuditEvent = 'crl_loaded' | 'crl_refused' | 'crl_pending' | 'crl_expiring'

/** What the CRL side needs to read and judge CRLs (built before anything it acts on). */
export interface CrlEnforcementDeps {
  readonly path: string
  readonly ca: X509Certificate
  /** Period of the file check (ms). */
  readonly intervalMs: number
  readonly audit: { record(event: CrlAuditEvent, fields: Record<string, unknown>): void }
  readonly logger?: Logger | undefined
}

/** What a new CRL acts on: given at start(), once the TLS server and the service exist. */
export interface CrlTargets {
  /** Puts the CRL into the TLS context for new handshakes; throws when it cannot (nothing changed then). */
  installTls(pem: string): void
  /** Closes open connections and removes live nodes whose certificate is now revoked. */
  dropRevoked(isRevoked: (serial: string) => boolean): { closedConnections: number; removedNodes: readonly string[] }
  /** Records an installed CRL's number in the persisted state (a restart refuses anything older). */
  recordCrlNumber(crlNumber: bigint): void
}

const numberOf = (crl: { crlNumber?: bigint | null }) => crl.crlNumber?.toString() ?? null

/** Keeps the CRL in force and everything that depends on it in step with the CRL file. */
export class CrlEnforcement {
  private readonly watcher: CrlWatcher
  private targets: CrlTargets | null = null

  /** True when the (normalised) serial is revoked by the CRL in force; checked on every request. */
  readonly isRevoked = (serial: string): boolean => this.watcher.inForce.revokedSerials.has(serial)

  constructor(
    initial: ParsedCrl,
    private readonly deps: CrlEnforcementDeps,
  ) {
    this.watcher = new CrlWatcher({
      path: deps.path,
      ca: deps.ca,
      intervalMs: deps.intervalMs,
      onLoaded: (next) => this.install(next),
      onRefused: (reason, details) => this.refused(reason, details),
      onPending: (crl) => this.pending(crl),
      onExpiring: (crl, msLeft) => this.expiring(crl, msLeft),
    }, initial)
  }

  /** The CRL OpenSSL enforces now (the watcher holds the one copy). */
  get inForce(): ParsedCrl {
    return this.watcher.inForce
  }

  /** A newer CRL waiting for its thisUpdate, if any. */
  get pendingCrl(): ParsedCrl | null {
    return this.watcher.pendingCrl
  }

  /** Records the CRL in force in the state and starts watching the file; new CRLs act on `targets`. */
  start(targets: CrlTargets): void {
    this.targets = targets
    const crlNumber = this.watcher.inForce.crlNumber
    if (crlNumber !== null) targets.recordCrlNumber(crlNumber)
    this.watcher.start()
  }

  /** Stops watching; no callback runs afterwards. */
  stop(): void {
    this.watcher.stop()
  }

  /** TLS first: if it throws, the watcher refuses the CRL and nothing else has changed. */
  private install(next: ParsedCrl): void {
    const targets = this.targets! // the watcher runs only after start()
    targets.installTls(next.pem) // the watcher put `next` in force just before, and takes it back if this throws
    let dropped = { closedConnections: 0, removedNodes: [] as readonly string[] }
    try {
      if (next.crlNumber !== null) targets.recordCrlNumber(next.crlNumber)
      dropped = targets.dropRevoked(this.isRevoked)
    } catch (err) {
      // The CRL is in force already (handshakes and every request check it); report, do not refuse.
      this.deps.logger?.error({ err: (err as Error).message }, 'CRL installed, but acting on it failed')
    }
    const { closedConnections, removedNodes } = dropped
    this.deps.audit.record('crl_loaded', {
      crl_number: numberOf(next),
      this_update: next.thisUpdate.toISOString(),
      revoked: next.revokedSerials.size,
      closed_connections: closedConnections,
      removed_nodes: removedNodes,
    })
    this.deps.logger?.info({ crlNumber: numberOf(next), closed: closedConnections, removed: removedNodes }, 'CRL reloaded')
  }

  private refused(reason: CrlRefusalReason, details: CrlRefusalDetails): void {
    const { path, message } = details
    this.deps.audit.record('crl_refused', { path, reason, message, crl_number: numberOf(details), in_force_crl_number: numberOf(this.watcher.inForce) })
    this.deps.logger?.warn({ reason, message }, 'new CRL refused; the previous CRL stays in force')
  }

  private pending(crl: ParsedCrl): void {
    const thisUpdate = crl.thisUpdate.toISOString()
    this.deps.audit.record('crl_pending', { path: this.deps.path, crl_number: numberOf(crl), this_update: thisUpdate, in_force_crl_number: numberOf(this.watcher.inForce) })
    this.deps.logger?.warn({ crlNumber: numberOf(crl), thisUpdate }, 'new CRL not valid yet (thisUpdate in the future: check the CA host clock); the previous CRL stays in force until then')
  }

  private expiring(crl: ParsedCrl, msLeft: number): void {
    const next_update = crl.nextUpdate?.toISOString() ?? null
    this.deps.audit.record('crl_expiring', { next_update, ms_left: msLeft })
    this.deps.logger?.warn({ nextUpdate: next_update }, 'the CRL nextUpdate is less than a day away or past: OpenSSL will refuse every client once it passes; publish a fresh CRL (pxe-pki crl)')
  }
}
