/**
 * Enrollment (SPEC "Device enrollment and renewal"): a node with no identity makes a P-256 key in memory,
 * a CSR for its name and the proof of its bootstrap token over that CSR, sends them to an enrollment
 * listener, and polls as told until the signer on the CA host answers. Issued: the identity is built
 * from the certificate, the in-memory key, and the CA and plan keys the answer carries (the CA must be
 * the one the node was given). Denied: EnrollmentDeniedError with the signer's reason. A request past its
 * time (410) or unknown (404) starts again with a new key. An unreachable listener is retried with
 * backoff. The token's secret and the key never reach a log or an error.
 */
import { X509Certificate, generateKeyPairSync } from 'node:crypto'
import { pino, type Logger } from 'pino'
import { enrollProof, parseToken, type EnrollToken } from '../core/enroll-token.js'
import { nameProblem } from '../core/names.js'
import { buildCsr, csrDer } from '../der/csr.js'
import { systemClock, type AgentClock } from './clock.js'
import { EnrollClient, EnrollUnreachableError, type EnrollReply } from './enroll-client.js'
import { pollDelayMs, requestQueuedSchema, requestStatusSchema } from './enroll-wire.js'
import { IdentityError, identityFromPem, type NodeIdentity } from './identity.js'
import { sleep } from './sleep.js'

/** After notBefore, before the first use: X.509 times are whole seconds, and the controller's clock may lag a little. */
const NOT_BEFORE_MARGIN_MS = 1000

/** What enrollment needs. */
export interface EnrollmentOptions {
  /** Enrollment listener base URLs (https://host:port), tried in order. */
  readonly enrollUrls: readonly string[]
  /** The bootstrap token (`pxe1.<id>.<secret>`, or parsed). */
  readonly token: string | EnrollToken
  /** The node's name (the certificate's CN). */
  readonly name: string
  /** The controller CA (PEM): the only certificate trusted for the listener, and the one the answer must carry. */
  readonly ca: string
  readonly logger?: Logger
  readonly clock?: AgentClock
  /** Aborts the wait (an EnrollmentAbortedError). */
  readonly signal?: AbortSignal
  /** Limit of one request (ms, default 10000). */
  readonly requestTimeoutMs?: number
}

/** The signer denied the enrollment; `reason` is its word. */
export class EnrollmentDeniedError extends Error {
  override readonly name = 'EnrollmentDeniedError'
  constructor(readonly reason: string) {
    super(`enrollment denied: ${reason}`)
  }
}

/** The controller refused the request itself (its shape, CSR or name): asking again cannot help. */
export class EnrollmentRefusedError extends Error {
  override readonly name = 'EnrollmentRefusedError'
}

/** The wait was aborted (the host is stopping). */
export class EnrollmentAbortedError extends Error {
  override readonly name = 'EnrollmentAbortedError'
}

const SILENT = pino({ enabled: false })
const RETRY_FIRST_MS = 1000
const RETRY_MAX_MS = 60_000

/** A new request: a fresh key, its CSR and the proof. */
function newRequest(name: string, token: EnrollToken) {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const csr = buildCsr(name, privateKey)
  const body = { token_id: token.id, csr, proof: enrollProof(token.secret, csrDer(csr)) }
  return { body, keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string }
}

/** True when two PEM certificates are the same certificate. */
export function sameCertificate(a: string, b: string): boolean {
  try {
    return new X509Certificate(a).fingerprint256 === new X509Certificate(b).fingerprint256
  } catch {
    return false
  }
}

/** Enrolls and resolves with the node's identity (the module comment). */
export async function enroll(opts: EnrollmentOptions): Promise<NodeIdentity> {
  const token = typeof opts.token === 'string' ? parseToken(opts.token) : opts.token
  const problem = nameProblem(opts.name)
  if (problem !== null) throw new RangeError(`the node name ${problem}`)
  const run = new EnrollmentRun(opts, token)
  try {
    return await run.untilIssued()
  } finally {
    run.close()
  }
}

/** One enrollment, from the first request to the identity. */
class EnrollmentRun {
  private readonly client: EnrollClient
  private readonly clock: AgentClock
  private readonly logger: Logger
  private failures = 0

  constructor(private readonly opts: EnrollmentOptions, private readonly token: EnrollToken) {
    this.client = new EnrollClient(opts.enrollUrls, opts.ca, opts.requestTimeoutMs ?? 10_000)
    this.clock = opts.clock ?? systemClock
    this.logger = opts.logger ?? SILENT
  }

  close(): void {
    this.client.close()
  }

  async untilIssued(): Promise<NodeIdentity> {
    for (;;) {
      const { body, keyPem } = newRequest(this.opts.name, this.token)
      const queued = await this.submit(body)
      const identity = await this.poll(queued.request_id, queued.poll_after_ms, keyPem)
      if (identity !== null) return identity
    }
  }

  /** Sends the request until a listener queues it (the same CSR again is the same request). */
  private async submit(body: object): Promise<{ request_id: string; poll_after_ms: number }> {
    for (;;) {
      const reply = await this.send('/v1/enroll', body)
      if (reply === null) continue
      if (reply.status === 202) {
        const queued = requestQueuedSchema.safeParse(reply.body)
        if (queued.success) {
          this.logger.info({ request_id: queued.data.request_id, token_id: this.token.id, enroll_url: reply.url }, 'enrollment requested; waiting for the signer')
          return queued.data
        }
        await this.retryLater(`the answer of ${reply.url} is not an enrollment request`)
      } else if (reply.status === 429) {
        await this.wait(Math.max(reply.retryAfterMs ?? 1000, 100))
      } else if (reply.status === 400 || reply.status === 413) {
        throw new EnrollmentRefusedError(`${reply.url} refused the enrollment request: ${reply.errorMessage ?? reply.errorCode ?? reply.status}`)
      } else {
        await this.retryLater(`${reply.url} answered ${reply.status} ${reply.errorCode ?? ''}`.trim())
      }
    }
  }

  /** Polls until issued (the identity), denied (thrown), or gone (null: start again with a new key). */
  private async poll(id: string, toldMs: number, keyPem: string): Promise<NodeIdentity | null> {
    const started = this.clock.now()
    let delay = pollDelayMs(toldMs)
    for (;;) {
      await this.wait(delay)
      const reply = await this.send(`/v1/enroll/${id}`)
      if (reply === null) continue
      if (reply.status === 410 || reply.status === 404) {
        this.logger.warn({ request_id: id, status: reply.status }, 'the enrollment request is gone (past its time, or unknown): enrolling again with a new key')
        return null
      }
      if (reply.status === 429) {
        delay = Math.max(reply.retryAfterMs ?? 1000, 100)
        continue
      }
      const parsed = reply.status === 200 ? requestStatusSchema.safeParse(reply.body) : null
      if (parsed === null || !parsed.success) {
        await this.retryLater(`${reply.url} answered the poll with ${reply.status} ${reply.errorCode ?? 'and no request status'}`)
        continue
      }
      const status = parsed.data
      if (status.status === 'denied') throw new EnrollmentDeniedError(status.reason)
      if (status.status === 'issued') return this.identityOf(status.certificate, status.ca, status.plan_jwks, keyPem)
      this.failures = 0
      const waited = Math.round((this.clock.now() - started) / 1000)
      this.logger.info({ request_id: id, waited_s: waited }, `waiting for the signer (request ${id}, ${waited} s)`)
      delay = pollDelayMs(toldMs)
    }
  }

  private async identityOf(cert: string, ca: string | undefined, jwks: unknown, keyPem: string): Promise<NodeIdentity> {
    if (ca === undefined || !sameCertificate(ca, this.opts.ca)) {
      throw new IdentityError('the enrollment answer carries another CA than the CA file: refusing the certificate')
    }
    if (jwks === undefined) throw new IdentityError('the enrollment answer carries no plan keys')
    const identity = await identityFromPem({ cert, key: keyPem, ca: this.opts.ca, jwks }, this.clock.wallNow())
    if (identity.nodeId !== this.opts.name) throw new IdentityError(`the issued certificate names ${identity.nodeId}, not ${this.opts.name}`)
    this.logger.info({ serial: identity.serial, not_after: new Date(identity.notAfter).toISOString() }, 'enrolled: certificate issued')
    // A re-enrollment's certificate starts a second after the one it supersedes (the controller takes the
    // later notBefore for the rotation), and the CA host's clock may run ahead: used before its notBefore,
    // the handshake would be refused. X.509 times are whole seconds: wait past it, as a renewal does.
    const early = identity.notBefore + NOT_BEFORE_MARGIN_MS - this.clock.wallNow()
    if (early > 0) await this.wait(early)
    return identity
  }

  /** One request; null when no listener answered (logged, after the backoff). */
  private async send(path: string, body?: object): Promise<EnrollReply | null> {
    this.checkAborted()
    try {
      return await this.client.request(path, body)
    } catch (err) {
      if (!(err instanceof EnrollUnreachableError)) throw err
      await this.retryLater(err.message)
      return null
    }
  }

  /** Logs a failed step at warn and waits, doubling from 1 s up to 60 s. */
  private async retryLater(detail: string): Promise<void> {
    const delay = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** Math.min(this.failures, 10))
    this.failures += 1
    this.logger.warn({ err: detail, retry_in_ms: delay }, 'enrollment step failed; retrying')
    await this.wait(delay)
  }

  private async wait(ms: number): Promise<void> {
    if (!(await sleep(this.clock, ms, this.opts.signal))) throw new EnrollmentAbortedError('enrollment was aborted')
  }

  private checkAborted(): void {
    if (this.opts.signal?.aborted === true) throw new EnrollmentAbortedError('enrollment was aborted')
  }
}
