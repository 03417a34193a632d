/**
 * HTTPS client of the controller: one keep-alive mTLS connection per controller URL, trusting only
 * the bundle's CA, failing over to the next URL on a connection error or a 503. It classifies what
 * went wrong so that the agent can tell "controller away" from "my certificate is refused".
 */
import https from 'node:https'
import { createSecureContext, type SecureContext } from 'node:tls'
import type { IncomingMessage } from 'node:http'
import type { AgentClock } from './clock.js'
import { BusyAwareAgent, ControllerBusyError, SharedSessions } from './busy-aware-agent.js'
import { FailoverOrder } from './failover-order.js'
import { errorReplySchema } from './wire.js'

/** An answer with a status (anything but a 503, which fails over). */
export interface ControllerReply {
  readonly status: number
  /** The parsed JSON body, or undefined when it was not JSON. */
  readonly body: unknown
  /** The error code of an error answer, or null. */
  readonly errorCode: string | null
  /** The message of an error answer (at most 200 characters), or null. */
  readonly errorMessage: string | null
  /** From `retry_after_ms` or `Retry-After` (429), else null. */
  readonly retryAfterMs: number | null
  /** The shard whose deposited session made the controller refuse a check-in, or null. */
  readonly refusedShardId: number | null
  readonly url: string
}

/** How one attempt at one URL failed. */
export type AttemptFailure = 'connect' | 'server_untrusted' | 'closed_after_handshake' | 'timeout' | 'unavailable' | 'bad_response' | 'busy'

/** One failed attempt, for logs. */
export interface FailedAttempt {
  readonly url: string
  readonly failure: AttemptFailure
  readonly detail: string
  /** For `busy`: when the controller said to come back (ms), if it said. */
  readonly retryAfterMs?: number | null
}

/** No controller URL gave an answer (connection errors or 503 everywhere). */
export class ControllerUnreachableError extends Error {
  override readonly name = 'ControllerUnreachableError'
  constructor(readonly attempts: readonly FailedAttempt[]) {
    super(`no controller answered: ${attempts.map((a) => `${a.url} ${a.failure} (${a.detail})`).join('; ')}`)
  }

  /** The earliest appointment a busy controller gave (ms from the attempt), or null when none deferred us. */
  get busyRetryAfterMs(): number | null {
    let earliest: number | null = null
    for (const a of this.attempts) {
      if (a.failure === 'busy' && a.retryAfterMs != null && (earliest === null || a.retryAfterMs < earliest)) earliest = a.retryAfterMs
    }
    return earliest
  }

  /** Every controller accepted the TLS connection and then closed it unanswered: how a Node controller refuses a revoked or unknown certificate. */
  get probableRefusal(): boolean {
    return this.attempts.length > 0 && this.attempts.every((a) => a.failure === 'closed_after_handshake')
  }
}

/** The controller refused this node's certificate for good (a TLS alert naming it, or 401). */
export class CertificateRefusedError extends Error {
  override readonly name = 'CertificateRefusedError'
  constructor(readonly url: string, readonly detail: string) {
    super(`the controller at ${url} refused this node's certificate: ${detail}`)
  }
}

/** Options of ControllerClient. */
export interface ControllerClientOptions {
  /** Controller base URLs (https://host:port), tried in order. */
  readonly urls: readonly string[]
  readonly ca: string
  readonly cert: string
  readonly key: string
  readonly clock: AgentClock
  /** Per-attempt limit, connection included (ms; asked per attempt, so it can follow the lease). */
  requestTimeoutMs(): number
}

/** TLS alerts by which a server refuses the client certificate. */
const CERT_ALERT = /ALERT_(CERTIFICATE_REVOKED|CERTIFICATE_UNKNOWN|CERTIFICATE_EXPIRED|BAD_CERTIFICATE|UNKNOWN_CA|ACCESS_DENIED|CERTIFICATE_REQUIRED)$/
/** Local verification failures of the controller's certificate (that controller is not ours). */
const SERVER_UNTRUSTED = /^(ERR_TLS_CERT_ALTNAME_INVALID|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|CERT_|ERR_TLS_CERT)/
const MAX_BODY_BYTES = 256 * 1024

type Attempt = { reply: ControllerReply } | { failed: FailedAttempt; retryFresh: boolean }

class AttemptError extends Error {
  constructor(readonly failure: AttemptFailure | 'refused', detail: string, readonly retryAfterMs: number | null = null) {
    super(detail)
  }
}

/** Retry-After is whole seconds (or an HTTP date, which we do not trust across clocks). */
function retryAfterOf(res: IncomingMessage, body: unknown): number | null {
  const parsed = errorReplySchema.safeParse(body)
  if (parsed.success && parsed.data.retry_after_ms !== undefined) return parsed.data.retry_after_ms
  const header = res.headers['retry-after']
  if (typeof header === 'string' && /^\d{1,9}$/.test(header.trim())) return Number(header.trim()) * 1000
  return null
}

/** Talks to the controller URLs in order, sticking to the last one that answered. */
export class ControllerClient {
  private readonly urls: readonly string[]
  private readonly context: SecureContext
  private readonly agents = new Map<string, https.Agent>()
  /** One TLS session for every URL: HA replicas share ticket keys, so it resumes on a new leader. */
  private readonly sessions = new SharedSessions()
  private readonly order: FailoverOrder

  constructor(private readonly opts: ControllerClientOptions) {
    if (opts.urls.length === 0) throw new Error('at least one controller URL is required')
    this.urls = opts.urls.map((u) => new URL(u).origin)
    this.order = new FailoverOrder(this.urls.length)
    // One context for every URL: only our CA is trusted, never the system store.
    this.context = createSecureContext({ ca: opts.ca, cert: opts.cert, key: opts.key, minVersion: 'TLSv1.2' })
  }

  /** The controller URL in use (the last one that answered, or the next to try). */
  get currentUrl(): string {
    return this.urls[this.order.first]!
  }

  /**
   * POSTs JSON, failing over on connection errors and 503 (not on a busy notice: its controller is kept
   * for the next attempt, up to MAX_BUSY_ENDED_ATTEMPTS in a row; failover-order.ts); throws the two
   * errors above.
   */
  async post(path: string, body: unknown): Promise<ControllerReply> {
    const failures: FailedAttempt[] = []
    for (const index of this.order.attempt()) {
      let attempt = await this.attempt(this.urls[index]!, path, body)
      // A keep-alive socket the server had just closed: once more on a fresh connection.
      if ('failed' in attempt && attempt.retryFresh) attempt = await this.attempt(this.urls[index]!, path, body)
      if ('reply' in attempt) {
        this.order.answered(index)
        return attempt.reply
      }
      failures.push(attempt.failed)
      if (attempt.failed.failure === 'busy' && this.order.busy(index)) throw new ControllerUnreachableError(failures)
    }
    this.order.exhausted()
    throw new ControllerUnreachableError(failures)
  }

  /** Closes every connection. */
  close(): void {
    for (const agent of this.agents.values()) agent.destroy()
    this.agents.clear()
  }

  private agentFor(url: string): https.Agent {
    let agent = this.agents.get(url)
    if (agent === undefined) {
      agent = new BusyAwareAgent({ keepAlive: true, maxSockets: 1, secureContext: this.context }, this.sessions)
      this.agents.set(url, agent)
    }
    return agent
  }

  private async attempt(url: string, path: string, body: unknown): Promise<Attempt> {
    let reused = false
    let handshook = false
    try {
      const reply = await this.send(url, path, body, (r, h) => {
        reused = r
        handshook = h
      })
      if (reply.status === 503) return { failed: { url, failure: 'unavailable', detail: reply.errorCode ?? '503' }, retryFresh: false }
      return { reply }
    } catch (err) {
      if (!(err instanceof AttemptError)) throw err
      if (err.failure === 'refused') throw new CertificateRefusedError(url, err.message)
      const failure = err.failure === 'connect' && handshook ? 'closed_after_handshake' : err.failure
      const failed: FailedAttempt = failure === 'busy' ? { url, failure, detail: err.message, retryAfterMs: err.retryAfterMs } : { url, failure, detail: err.message }
      return { failed, retryFresh: reused && err.failure === 'connect' }
    }
  }

  /** One request; `seen` reports whether the socket was reused and whether a fresh handshake completed. */
  private send(url: string, path: string, body: unknown, seen: (reused: boolean, handshook: boolean) => void): Promise<ControllerReply> {
    const payload = JSON.stringify(body)
    const { clock } = this.opts
    const requestTimeoutMs = this.opts.requestTimeoutMs()
    return new Promise((resolve, reject) => {
      let reused = false
      let handshook = false
      let settled = false
      const req = https.request(new URL(path, url), {
        method: 'POST',
        agent: this.agentFor(url),
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), accept: 'application/json' },
      })
      const settle = (outcome: () => ControllerReply) => {
        if (settled) return
        settled = true
        clock.clearTimeout(timer)
        seen(reused, handshook)
        try {
          resolve(outcome())
        } catch (err) {
          reject(err)
        }
      }
      const fail = (err: AttemptError) => {
        settle(() => {
          throw err
        })
        req.destroy()
      }
      const timer = clock.setTimeout(() => fail(new AttemptError('timeout', `no answer within ${requestTimeoutMs} ms`)), requestTimeoutMs)
      req.on('socket', (socket) => {
        // Node sets reusedSocket only for an idle socket; a request queued behind another gets the freed
        // socket with reusedSocket false. A socket whose handshake is done was made for an earlier request.
        reused = req.reusedSocket || BusyAwareAgent.isEstablished(socket)
        if (!reused) socket.once('secureConnect', () => (handshook = true))
      })
      req.on('error', (err: NodeJS.ErrnoException) => fail(classify(err)))
      req.on('response', (res) => {
        const chunks: Buffer[] = []
        let size = 0
        res.on('data', (chunk: Buffer) => {
          size += chunk.length
          if (size > MAX_BODY_BYTES) fail(new AttemptError('bad_response', 'the answer is too large'))
          else chunks.push(chunk)
        })
        res.on('end', () => settle(() => this.reply(url, res, Buffer.concat(chunks).toString('utf8'))))
        res.on('error', (err: NodeJS.ErrnoException) => fail(classify(err)))
      })
      req.end(payload)
    })
  }

  private reply(url: string, res: IncomingMessage, text: string): ControllerReply {
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      body = undefined
    }
    const status = res.statusCode ?? 0
    const error = status >= 400 ? errorReplySchema.safeParse(body) : null
    if (status === 401) throw new AttemptError('refused', `401 ${error?.success ? error.data.error : 'unauthenticated'}`)
    return {
      status,
      body,
      errorCode: error?.success ? error.data.error : null,
      errorMessage: error?.success ? error.data.message.slice(0, 200) : null,
      retryAfterMs: status === 429 ? retryAfterOf(res, body) : null,
      refusedShardId: error?.success ? (error.data.refused_shard_id ?? null) : null,
      url,
    }
  }
}

/** Maps a socket or TLS error to an attempt failure. */
function classify(err: NodeJS.ErrnoException): AttemptError {
  if (err instanceof ControllerBusyError) return new AttemptError('busy', err.message, err.retryAfterMs)
  const code = err.code ?? ''
  if (CERT_ALERT.test(code)) return new AttemptError('refused', `TLS alert ${code.replace(/^ERR_SSL_(SSLV3|TLSV1|TLSV13)_ALERT_/, '').toLowerCase()}`)
  if (SERVER_UNTRUSTED.test(code)) return new AttemptError('server_untrusted', `the controller's certificate is not trusted (${code})`)
  return new AttemptError('connect', code || err.message.slice(0, 64))
}
