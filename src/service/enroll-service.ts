/**
 * Enrollment and renewal on the controller (SPEC "Device enrollment and renewal"): the queue of CSRs that
 * wait for the signer, and the certificates it posts, installed only when they fit their request. The
 * controller never signs and never sees a token's secret: it checks what it can (the body's shape, the
 * CSR's own signature, key and name, the proof's shape) and leaves the token, the proof and the policy
 * to the signer on the CA host. Every change is written (one write per event-loop turn) before the answer.
 */
import { randomBytes, X509Certificate } from 'node:crypto'
import { z } from 'zod'
import { AppError } from '../errors.js'
import { nameProblem } from '../core/names.js'
import { DEFAULT_ENROLL_LIMITS, EnrollQueue, type EnrollLimits, type EnrollRequest } from '../core/enroll-queue.js'
import { requestOf, storedEnroll, type EnrollStore, type ProofSealer } from '../core/enroll-record.js'
import { TOKEN_ID_PATTERN } from '../core/enroll-token.js'
import { CsrError, readCsr, type VerifiedCsr } from '../der/csr.js'
import { principalFromCertificate, isPrincipal, type Principal } from '../identity/principal.js'
import type { AuditSink } from '../audit/audit-sink.js'

/** Bodies of the enrollment listener and the renewal endpoints: at most 16 KiB (SPEC). */
export const ENROLL_BODY_LIMIT_BYTES = 16 * 1024
const REQUEST_ID = /^[A-Za-z0-9_-]{22}$/
const PEM_CSR = /^-----BEGIN CERTIFICATE REQUEST-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE REQUEST-----\r?\n?$/
const PEM_CERT = /^-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----\r?\n?$/

export const enrollBodySchema = z
  .object({
    token_id: z.string().regex(TOKEN_ID_PATTERN, 'must be 10 characters of base32 (a-z, 2-7)'),
    csr: z.string().max(ENROLL_BODY_LIMIT_BYTES).regex(PEM_CSR, 'must be one PEM certificate request'),
    proof: z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'must be 43 characters of base64url (HMAC-SHA256)'),
  })
  .strict()
export const renewBodySchema = z.object({ csr: enrollBodySchema.shape.csr }).strict()
export const requestParamsSchema = z.object({ request_id: z.string().regex(REQUEST_ID, 'must be a request id (22 characters of base64url)') }).strict()
export const decisionBodySchema = z.union([
  z.object({ certificate: z.string().max(ENROLL_BODY_LIMIT_BYTES).regex(PEM_CERT, 'must be one PEM certificate') }).strict(),
  z.object({ denied: z.string().min(1).max(256) }).strict(),
])
/** `GET /v1/enroll/requests` query: a page of at most `limit` pending requests, those after request `after`. */
export const signerListQuerySchema = z
  .object({
    after: z.string().regex(REQUEST_ID, 'must be a request id (22 characters of base64url)').optional(),
    limit: z.string().regex(/^[1-9][0-9]{0,3}$/, 'must be a whole number from 1 to 1000').transform(Number).refine((n) => n <= 1000, 'must be at most 1000').optional(),
  })
  .strict()

export type EnrollBody = z.infer<typeof enrollBodySchema>
export type DecisionBody = z.infer<typeof decisionBodySchema>

/**
 * 128 random bits in base64url, never starting with "-" or "_": an id is typed on command lines
 * (`pxe-pki enroll deny ID`), where a leading "-" reads as an option.
 */
export function newRequestId(): string {
  for (;;) {
    const id = randomBytes(16).toString('base64url')
    if (/^[A-Za-z0-9]/.test(id)) return id
  }
}

/** A refusal at the door, audited `enroll_refused` (limited per address) by the route. */
export class EnrollRefused extends AppError {
  constructor(readonly rule: string, message: string) {
    super('invalid_request', message)
  }
}

export interface EnrollServiceDeps {
  readonly now: () => number
  readonly audit: AuditSink
  readonly store: EnrollStore
  readonly sealer: ProofSealer
  readonly caPem: string
  /** The plan keys' JWKS a node pins (handed out with its certificate). */
  readonly planJwks: () => unknown
  readonly limits?: EnrollLimits
  /** How long a node waits between polls. */
  readonly pollAfterMs?: number
  readonly newId?: () => string
}

/** What a poll answers. */
export interface EnrollStatus {
  readonly status: EnrollRequest['status']
  readonly certificate?: string
  readonly ca?: string
  readonly plan_jwks?: unknown
  readonly reason?: string
}

/** The queue of one serving controller (HA: of one leadership term). */
export class EnrollService {
  private readonly queue: EnrollQueue
  /** The CA, read at the first certificate posted (most controllers never see one). */
  private caCert: X509Certificate | null = null
  private readonly newId: () => string
  private waiting: Promise<void> | null = null
  private chain: Promise<void> = Promise.resolve()

  private constructor(private readonly deps: EnrollServiceDeps) {
    this.queue = new EnrollQueue(deps.limits ?? DEFAULT_ENROLL_LIMITS)
    this.newId = deps.newId ?? newRequestId
  }

  /** Loads what the store kept (a restart, a take-over) and serves from it. */
  static async open(deps: EnrollServiceDeps): Promise<EnrollService> {
    const service = new EnrollService(deps)
    const stored = await deps.store.load()
    service.queue.restore(stored.map((record) => requestOf(record, deps.sealer)), deps.now())
    return service
  }

  /** Requests waiting for the signer, and all held. */
  figures(): { pending: number; held: number } {
    this.queue.expire(this.deps.now())
    return { pending: this.queue.pending, held: this.queue.size }
  }

  /** POST /v1/enroll: queues the request (or finds the one this CSR made) once it is written. */
  async enroll(body: EnrollBody, source: string): Promise<{ request_id: string; poll_after_ms: number }> {
    const csr = this.checkedCsr(body.csr)
    return this.submit({ kind: 'enroll', name: csr.name, csr: body.csr, fingerprint: csr.fingerprint, tokenId: body.token_id, proof: body.proof, source, presentingSerial: null })
  }

  /** POST /v1/renew: the CSR must name the certificate's own CN; only the certificate on record may renew. */
  async renew(csrPem: string, me: Principal, source: string, certOnRecord: string | null): Promise<{ request_id: string; poll_after_ms: number }> {
    if (certOnRecord !== null && certOnRecord !== me.serial) {
      throw new AppError('identity_conflict', `node ${me.name} is live with another certificate: only the certificate of its last accepted check-in may renew`)
    }
    const csr = this.checkedCsr(csrPem)
    if (csr.name !== me.name) throw new EnrollRefused('name', "the CSR's CN must be the certificate's own name")
    return this.submit({ kind: 'renew', name: csr.name, csr: csrPem, fingerprint: csr.fingerprint, tokenId: null, proof: null, source, presentingSerial: me.serial })
  }

  /** GET /v1/enroll/:request_id (an enrollment; the enrollment listener asks no certificate, the id is the secret). */
  status(id: string): EnrollStatus {
    const request = this.queue.get(this.deps.now(), id)
    if (request.kind !== 'enroll') throw new AppError('not_found', 'no such request')
    return this.statusOf(request)
  }

  /** GET /v1/renew/:request_id: the same node only. */
  renewalStatus(id: string, me: Principal): EnrollStatus {
    const request = this.queue.get(this.deps.now(), id)
    if (request.kind !== 'renew' || request.name !== me.name) throw new AppError('not_found', 'no such request')
    return this.statusOf(request)
  }

  /** GET /v1/enroll/requests (signer): pending requests with what the signer checks, oldest first. */
  pendingForSigner(limit: number, after?: string): object[] {
    return this.queue.listPending(this.deps.now(), limit, after).map((r) => ({
      request_id: r.id,
      kind: r.kind,
      name: r.name,
      csr: r.csr,
      token_id: r.tokenId,
      proof: r.proof,
      source: r.source,
      presenting_serial: r.presentingSerial,
      created_at: new Date(r.createdAt).toISOString(),
    }))
  }

  /** The operator's view (pxe-ctl enroll list): no CSR, no proof. */
  queueView(): { pending: number; held: number; requests: object[] } {
    const now = this.deps.now()
    const requests = this.queue.listPending(now, this.queue.limits.maxPending).map((r) => ({
      request_id: r.id,
      kind: r.kind,
      name: r.name,
      token_id: r.tokenId,
      source: r.source,
      presenting_serial: r.presentingSerial,
      created_at: new Date(r.createdAt).toISOString(),
      age_ms: now - r.createdAt,
    }))
    return { pending: this.queue.pending, held: this.queue.size, requests }
  }

  /**
   * POST /v1/enroll/requests/:request_id (signer): a certificate is installed only if it was issued by
   * this controller's CA, carries the request's public key and name, the role node, and is valid now; a
   * denial is recorded with its reason. Anything else is refused (400) and audited.
   */
  async decide(id: string, body: DecisionBody, signer: Principal): Promise<{ request_id: string; status: EnrollRequest['status'] }> {
    const now = this.deps.now()
    const request = this.queue.get(now, id)
    if (request.status !== 'pending') throw new AppError('identity_conflict', `the request was ${request.status} already`)
    if ('denied' in body) {
      this.queue.decide(now, id, { denied: body.denied, by: signer.name })
      await this.persist()
      this.deps.audit.record('enroll_denied', { request_id: id, kind: request.kind, name: request.name, reason: body.denied, signer: signer.name, signer_serial: signer.serial })
      return { request_id: id, status: 'denied' }
    }
    const problem = this.certificateProblem(body.certificate, request, Date.now())
    if (problem !== null) {
      this.deps.audit.record('enroll_refused', { request_id: id, name: request.name, reason: problem, signer: signer.name, signer_serial: signer.serial })
      throw new AppError('invalid_request', `the certificate does not fit the request: ${problem}`)
    }
    const serial = new X509Certificate(body.certificate).serialNumber.toLowerCase().replace(/^0+/, '')
    const rule = request.kind === 'renew' ? 'renewal' : 'token'
    this.queue.decide(now, id, { certificate: body.certificate, by: signer.name, rule })
    await this.persist()
    this.deps.audit.record('enroll_issued', { request_id: id, kind: request.kind, name: request.name, serial, signer: signer.name, signer_serial: signer.serial, rule })
    return { request_id: id, status: 'issued' }
  }

  private statusOf(request: EnrollRequest): EnrollStatus {
    if (request.status === 'issued') return { status: 'issued', certificate: request.certificate!, ca: this.deps.caPem, plan_jwks: this.deps.planJwks() }
    if (request.status === 'denied') return { status: 'denied', reason: request.reason ?? 'denied' }
    return { status: 'pending' }
  }

  private async submit(input: Parameters<EnrollQueue['submit']>[1]): Promise<{ request_id: string; poll_after_ms: number }> {
    const { request, created } = this.queue.submit(this.deps.now(), input, this.newId)
    if (created) {
      await this.persist()
      this.deps.audit.record('enroll_requested', { request_id: request.id, kind: request.kind, name: request.name, token_id: request.tokenId, source: request.source, presenting_serial: request.presentingSerial })
    }
    return { request_id: request.id, poll_after_ms: this.deps.pollAfterMs ?? 2000 }
  }

  private checkedCsr(pem: string): VerifiedCsr {
    let csr: VerifiedCsr
    try {
      csr = readCsr(pem, 'the controller')
    } catch (err) {
      if (err instanceof CsrError) throw new EnrollRefused('csr', err.message)
      throw err
    }
    const problem = nameProblem(csr.name)
    if (problem !== null) throw new EnrollRefused('name', `the CSR's CN is not a valid name: ${problem}`)
    return csr
  }

  /** Why a posted certificate may not be installed for `request`, or null. */
  private certificateProblem(pem: string, request: EnrollRequest, wallNow: number): string | null {
    let cert: X509Certificate
    try {
      cert = new X509Certificate(pem)
    } catch {
      return 'not a certificate'
    }
    this.caCert ??= new X509Certificate(this.deps.caPem)
    if (!cert.checkIssued(this.caCert) || !cert.verify(this.caCert.publicKey)) return "not issued by this controller's CA"
    const who = principalFromCertificate(cert)
    if (!isPrincipal(who)) return who.reason
    if (who.role !== 'node') return `its role is ${who.role}, not node`
    if (who.name !== request.name) return 'it names another node'
    if (wallNow > who.notAfter) return 'it has expired'
    let csr: VerifiedCsr
    try {
      csr = readCsr(request.csr, 'the controller')
    } catch {
      return 'the request no longer reads'
    }
    if (!cert.publicKey.export({ type: 'spki', format: 'der' }).equals(csr.spkiDer)) return "it carries another key than the request's"
    return null
  }

  /** Writes what changed; the changes of one event-loop turn go in one write. */
  private persist(): Promise<void> {
    if (this.waiting !== null) return this.waiting
    const run = this.chain
      .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
      .then(async () => {
        this.waiting = null
        const changes = this.queue.takeChanges()
        if (changes.put.length === 0 && changes.deleted.length === 0) return
        try {
          await this.deps.store.write(changes.put.map((r) => storedEnroll(r, this.deps.sealer)), changes.deleted)
        } catch (err) {
          this.queue.requeueChanges(changes)
          throw new AppError('unavailable', `the enrollment queue cannot be written right now (${(err as Error).message.slice(0, 120)}); retry`)
        }
      })
    this.waiting = run
    this.chain = run.catch(() => undefined)
    return run
  }
}
