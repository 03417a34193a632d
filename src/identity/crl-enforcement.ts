/**
 * The CRL in force in a running controller: the watcher wired to the TLS context, the open connections,
 * the node map, the CRL number recorded in the state and the audit log. Nothing here decides which CRL
 * wins (crl-decide.ts does); this file only carries the verdicts out, in a safe order. CRLs from
 * elsewhere than the file (an operator's push, the cluster's copy in HA) are offered here and judged
 * against the same CRL in force by the same rules, so the file and a push can never undo each other.
 */
import type { X509Certificate } from 'node:crypto'
import type { Logger } from 'pino'
import type { ParsedCrl } from './crl.js'
import { decideCrl, pushLifetimeProblem, type CrlDecision } from './crl-decide.js'
import { CrlWatcher, type CrlRefusalDetails, type CrlRefusalReason } from './crl-watcher.js'

/** Where a CRL came from, for the audit line: the `tls.crl` file, an operator's push, the cluster's copy (HA). */
export type CrlOrigin = { readonly source: 'file' } | { readonly source: 'push'; readonly by: string } | { readonly source: 'cluster' }

/** The verdict on an offered CRL; `refused` has been audited already. */
export type CrlOfferOutcome =
  | { readonly kind: 'loaded'; readonly crl: ParsedCrl }
  | { readonly kind: 'same'; readonly crl: ParsedCrl }
  | { readonly kind: 'not_yet_valid'; readonly crl: ParsedCrl }
  | { readonly kind: 'refused'; readonly reason: CrlRefusalReason; readonly message: string }

/** An offer before start(): nothing acts on a new CRL yet; the caller offers it again shortly. */
export class CrlSideNotStarted extends Error {
  override readonly name = 'CrlSideNotStarted'
}

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
  /** The wall clock the CRL times are judged by (default Date.now). */
  readonly now?: () => number
  /** The `tls.crl` content already judged at the start, when the CRL in force came from elsewhere. */
  readonly fileJudgedAtStart?: string
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

/** The audit fields that say where a CRL came from (and, pushed, who pushed it). */
function originFields(origin: CrlOrigin): Record<string, string> {
  return origin.source === 'push' ? { source: 'push', by: origin.by } : { source: origin.source }
}

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
      ...(deps.now !== undefined ? { now: deps.now } : {}),
      ...(deps.fileJudgedAtStart !== undefined ? { judgedAtStart: deps.fileJudgedAtStart } : {}),
      onLoaded: (next) => this.install(next, { source: 'file' }),
      onRefused: (reason, details) => this.refused(reason, details, { source: 'file' }),
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

  /** What offering `pem` from `origin` would do now, without doing it (parsed and verified under the CA). */
  judge(pem: string, origin?: Pick<CrlOrigin, 'source'>): CrlDecision {
    const now = (this.deps.now ?? Date.now)()
    const decision = decideCrl(this.inForce, pem, this.deps.ca, now)
    if (origin?.source === 'push' && decision.kind === 'load') {
      const problem = pushLifetimeProblem(decision.crl, now)
      if (problem !== null) return { kind: 'refuse', reason: 'expires_soon', message: problem, crl: decision.crl }
    }
    return decision
  }

  /**
   * Judges `pem` against the CRL in force by the file's rules and installs it when it wins, exactly as a
   * changed file is installed (TLS, open connections, nodes, the recorded CRL number, audited with its
   * origin). A thisUpdate in the future is refused for a push (the operator can push it again once it is
   * valid) and returned as `not_yet_valid` for the cluster's copy (offered again on the next poll).
   */
  offer(pem: string, origin: CrlOrigin): CrlOfferOutcome {
    if (this.targets === null) throw new CrlSideNotStarted('the CRL side has not started yet')
    const decision = this.judge(pem, origin)
    const inForceNumber = this.inForce.crlNumber
    const refuse = (reason: CrlRefusalReason, message: string, crl?: ParsedCrl): CrlOfferOutcome => {
      this.refused(reason, { path: '', message, inForceCrlNumber: inForceNumber, ...(crl !== undefined ? { crlNumber: crl.crlNumber } : {}) }, origin)
      return { kind: 'refused', reason, message }
    }
    switch (decision.kind) {
      case 'same':
        return { kind: 'same', crl: this.inForce }
      case 'refuse':
        return refuse(decision.reason, decision.message, decision.crl)
      case 'pending':
        if (origin.source !== 'push') return { kind: 'not_yet_valid', crl: decision.crl }
        return refuse('not_yet_valid', `the CRL's thisUpdate ${decision.crl.thisUpdate.toISOString()} is in the future: OpenSSL would refuse every client until then (check the CA host's clock); push it again once it is valid`, decision.crl)
      case 'load':
        try {
          this.watcher.adopt(decision.crl, () => this.install(decision.crl, origin))
        } catch (err) {
          return refuse('install_failed', `the CRL could not be installed: ${err instanceof Error ? err.message : String(err)}`, decision.crl)
        }
        return { kind: 'loaded', crl: decision.crl }
    }
  }

  /** TLS first: if it throws, the CRL is put back and refused, and nothing else has changed. */
  private install(next: ParsedCrl, origin: CrlOrigin): void {
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
      ...originFields(origin),
    })
    this.deps.logger?.info({ crlNumber: numberOf(next), closed: closedConnections, removed: removedNodes, ...originFields(origin) }, 'CRL reloaded')
  }

  private refused(reason: CrlRefusalReason, details: CrlRefusalDetails, origin: CrlOrigin): void {
    const { message } = details
    const where = origin.source === 'file' ? { path: details.path } : {}
    this.deps.audit.record('crl_refused', { ...where, reason, message, crl_number: numberOf(details), in_force_crl_number: numberOf(this.watcher.inForce), ...originFields(origin) })
    // The file older than the CRL in force is what an operator sees after a push: say how to mend it.
    const hint = origin.source === 'file' && reason === 'older_crl' ? ' (a CRL pushed with POST /v1/crl may be newer than the file: copy the newest crl.pem here, or leave it; the newer CRL stays in force)' : ''
    this.deps.logger?.warn({ reason, message, ...originFields(origin) }, `new CRL refused; the previous CRL stays in force${hint}`)
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
