/**
 * HTTPS client of the controller: one keep-alive mTLS connection per controller URL, trusting only
 * the bundle's CA, failing over to the next URL on a connection error, a refusal of the certificate or
 * a 503. It classifies what went wrong so that the agent can tell "controller away" from "my
 * certificate is refused".
 *
 * When a refusal of the certificate is definitive (the agent then halts). A controller refuses it in one of
 * three ways: a TLS alert naming the certificate (revoked, expired, bad, unknown CA, ...: what OpenSSL
 * sends), a 401 `unauthenticated`, or by closing the connection right after the TLS handshake without
 * answering (what a Node controller does with a revoked or expired certificate: it sends no alert). Only
 * a refusal on a new connection is taken: one on a kept-alive connection is asked again at once on a new
 * one. A refusal fails over to the next URL like a connection error (one controller's word may be a
 * replica misconfigured during a rollout). When every configured URL refused, every URL is asked again at
 * once, each on a new connection; if every one refuses again, the refusal is definitive
 * (CertificateRefusedError). Anything less, some URLs refusing while others cannot be reached, is busy
 * or times out, or a refusal the second round does not repeat (a controller that stopped just after a
 * handshake), is probable: a ControllerUnreachableError whose `refusals` are not empty.
 *
 * A renewed certificate is switched to between requests (switchIdentity): requests wait while those in
 * flight finish, the kept-alive connections and the TLS session (which would present the old
 * certificate again) are dropped, and until a check-in with the new certificate is answered 200 only
 * check-ins go out, so that the controller records the rotation before any claim presents it.
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

/**
 * How one attempt at one URL failed. Two refuse the certificate (isRefusal): `certificate_refused` (a
 * TLS alert naming it, or 401) and `closed_after_handshake` (closed right after a new connection's TLS
 * handshake, unanswered).
 */
export type AttemptFailure = 'connect' | 'server_untrusted' | 'closed_after_handshake' | 'certificate_refused' | 'timeout' | 'unavailable' | 'bad_response' | 'busy'

/** One failed attempt, for logs. */
export interface FailedAttempt {
  readonly url: string
  readonly failure: AttemptFailure
  readonly detail: string
  /** For `busy`: when the controller said to come back (ms), if it said. */
  readonly retryAfterMs?: number | null
}

/** Whether a failed attempt refused this node's certificate (see the module comment). */
export function isRefusal(attempt: FailedAttempt): boolean {
  return attempt.failure === 'certificate_refused' || attempt.failure === 'closed_after_handshake'
}

/** A refusal for a message: the URL and what it did. */
function describeRefusal(attempt: FailedAttempt): string {
  return attempt.failure === 'closed_after_handshake'
    ? `${attempt.url} closed the connection right after the TLS handshake without answering (${attempt.detail}; how a Node controller refuses a revoked or expired certificate)`
    : `${attempt.url} ${attempt.detail}`
}

/** No controller URL gave an answer (connection errors, refusals short of definitive, or 503 everywhere). */
export class ControllerUnreachableError extends Error {
  override readonly name = 'ControllerUnreachableError'
  /** The refusals of the certificate among the failures (of both rounds, when every URL refused once). */
  readonly refusals: readonly FailedAttempt[]

  constructor(readonly attempts: readonly FailedAttempt[], refusals: readonly FailedAttempt[] = attempts.filter(isRefusal)) {
    super(`no controller answered: ${attempts.map((a) => `${a.url} ${a.failure} (${a.detail})`).join('; ')}`)
    this.refusals = refusals
  }

  /** The earliest appointment a busy controller gave (ms from the attempt), or null when none deferred us. */
  get busyRetryAfterMs(): number | null {
    let earliest: number | null = null
    for (const a of this.attempts) {
      if (a.failure === 'busy' && a.retryAfterMs != null && (earliest === null || a.retryAfterMs < earliest)) earliest = a.retryAfterMs
    }
    return earliest
  }

  /** Some controller refused the certificate, but not every one twice: probably revoked or expired. */
  get probableRefusal(): boolean {
    return this.refusals.length > 0
  }

  /** The refusals, for a log line. */
  get refusalDetail(): string {
    return `not every controller refused it twice on new connections: ${this.refusals.map(describeRefusal).join('; ')}`
  }
}

/**
 * Every controller URL refused this node's certificate, on new connections, twice in a row (the module
 * comment): definitive. `refusals` are the second round's, one per URL.
 */
export class CertificateRefusedError extends Error {
  override readonly name = 'CertificateRefusedError'
  constructor(readonly refusals: readonly FailedAttempt[]) {
    super(`every controller refused this node's certificate, on new connections twice in a row: ${refusals.map(describeRefusal).join('; ')}`)
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

/**
 * TLS alerts by which a server refuses the client certificate (OpenSSL's codes: ERR_SSL_SSLV3_ALERT_CERTIFICATE_REVOKED
 * under OpenSSL 3.0, as in Node 20; ERR_SSL_SSL/TLS_ALERT_CERTIFICATE_REVOKED under the OpenSSL of Node 24).
 */
const CERT_ALERT = /ALERT_(CERTIFICATE_REVOKED|CERTIFICATE_UNKNOWN|CERTIFICATE_EXPIRED|BAD_CERTIFICATE|UNSUPPORTED_CERTIFICATE|UNKNOWN_CA|ACCESS_DENIED|CERTIFICATE_REQUIRED)$/
/** Local verification failures of the controller's certificate (that controller is not ours). */
const SERVER_UNTRUSTED = /^(ERR_TLS_CERT_ALTNAME_INVALID|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|CERT_|ERR_TLS_CERT)/
const MAX_BODY_BYTES = 256 * 1024
/** The request that records a renewed certificate as a rotation (it goes first after a switch). */
const CHECKIN_PATH = '/v1/checkin'

type Attempt = { reply: ControllerReply } | { failed: FailedAttempt; retryFresh: boolean }
/** One pass over the URLs: an answer, or every failure and whether every URL was tried (a busy notice ends a pass early). */
type Pass = { reply: ControllerReply } | { failures: FailedAttempt[]; everyUrl: boolean }

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
  private context: SecureContext
  private readonly agents = new Map<string, https.Agent>()
  /** One TLS session for every URL: HA replicas share ticket keys, so it resumes on a new leader. */
  private sessions = new SharedSessions()
  private readonly order: FailoverOrder
  /** Requests sent and not yet settled (a switch of identity waits for none). */
  private inFlight = 0
  private idleWaiters: (() => void)[] = []
  /** While an identity switch waits for the requests in flight: every new request waits for it. */
  private switching: Promise<void> | null = null
  /** After a switch, until a check-in is answered 200: requests other than check-ins wait for it. */
  private checkinFirst: { promise: Promise<void>; open: () => void } | null = null

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
   * POSTs JSON, failing over on connection errors, refusals of the certificate and 503 (not on a busy
   * notice: its controller is kept for the next attempt, up to MAX_BUSY_ENDED_ATTEMPTS in a row;
   * failover-order.ts); throws the two errors above (when a refusal is definitive: the module comment).
   */
  async post(path: string, body: unknown): Promise<ControllerReply> {
    return this.request(path, body)
  }

  /** GETs `path` with the same failover and errors as post(). */
  async get(path: string): Promise<ControllerReply> {
    return this.request(path, undefined)
  }

  /**
   * Presents `cert` and `key` on every new connection from now on (a renewal): waits for the requests in
   * flight, drops the kept-alive connections and the shared TLS session, and holds every request but a
   * check-in until a check-in is answered 200 (the module comment). Resolves once switched.
   */
  async switchIdentity(cert: string, key: string): Promise<void> {
    while (this.switching !== null) await this.switching
    let done!: () => void
    this.switching = new Promise((resolve) => (done = resolve))
    try {
      while (this.inFlight > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve))
      this.context = createSecureContext({ ca: this.opts.ca, cert, key, minVersion: 'TLSv1.2' })
      for (const agent of this.agents.values()) agent.destroy()
      this.agents.clear()
      this.sessions = new SharedSessions()
      this.checkinFirst?.open()
      let open!: () => void
      const promise = new Promise<void>((resolve) => (open = resolve))
      this.checkinFirst = { promise, open }
    } finally {
      this.switching = null
      done()
    }
  }

  /** One request once the identity gates let it through (a method per body: undefined is a GET). */
  private async request(path: string, body: unknown): Promise<ControllerReply> {
    for (;;) {
      if (this.switching !== null) await this.switching
      else if (this.checkinFirst !== null && path !== CHECKIN_PATH) await this.checkinFirst.promise
      else break
    }
    this.inFlight += 1
    try {
      const reply = await this.failingOver(path, body)
      if (path === CHECKIN_PATH && reply.status === 200 && this.checkinFirst !== null) {
        this.checkinFirst.open()
        this.checkinFirst = null
      }
      return reply
    } finally {
      this.inFlight -= 1
      if (this.inFlight === 0) for (const wake of this.idleWaiters.splice(0)) wake()
    }
  }

  private async failingOver(path: string, body: unknown): Promise<ControllerReply> {
    const first = await this.pass(path, body, false)
    if ('reply' in first) return first.reply
    if (!refusedByEvery(first)) throw new ControllerUnreachableError(first.failures)
    // Every controller refused, each on a new connection. Once more at once, each on a new connection
    // again: a refusal that every controller repeats is definitive; a transient close is not repeated.
    const second = await this.pass(path, body, true)
    if ('reply' in second) return second.reply
    if (refusedByEvery(second)) throw new CertificateRefusedError(second.failures)
    throw new ControllerUnreachableError(second.failures, [...first.failures, ...second.failures].filter(isRefusal))
  }

  /** Tries the URLs in failover order (`fresh`: each on a new connection) until one answers. */
  private async pass(path: string, body: unknown, fresh: boolean): Promise<Pass> {
    const failures: FailedAttempt[] = []
    for (const index of this.order.attempt()) {
      const url = this.urls[index]!
      let attempt = await this.attempt(url, path, body, fresh)
      // A kept-alive socket the server had just closed, or a refusal on one: once more on a new connection.
      if ('failed' in attempt && attempt.retryFresh) attempt = await this.attempt(url, path, body, true)
      if ('reply' in attempt) {
        this.order.answered(index)
        return attempt
      }
      failures.push(attempt.failed)
      if (attempt.failed.failure === 'busy' && this.order.busy(index)) return { failures, everyUrl: false }
    }
    this.order.exhausted()
    return { failures, everyUrl: true }
  }

  /** Closes every connection (and lets any request held for a check-in go, to fail or be answered). */
  close(): void {
    for (const agent of this.agents.values()) agent.destroy()
    this.agents.clear()
    this.checkinFirst?.open()
    this.checkinFirst = null
  }

  private agentFor(url: string): https.Agent {
    let agent = this.agents.get(url)
    if (agent === undefined) {
      agent = new BusyAwareAgent({ keepAlive: true, maxSockets: 1, secureContext: this.context }, this.sessions)
      this.agents.set(url, agent)
    }
    return agent
  }

  /**
   * One request at `url`: on its kept-alive connection, or (`fresh`) on a new connection of its own,
   * closed afterwards (the kept-alive one, and any request queued on it, is left alone).
   */
  private async attempt(url: string, path: string, body: unknown, fresh: boolean): Promise<Attempt> {
    let reused = false
    let handshook = false
    const agent = fresh ? new BusyAwareAgent({ keepAlive: false, maxSockets: 1, secureContext: this.context }, this.sessions) : this.agentFor(url)
    try {
      const reply = await this.send(url, agent, path, body, (r, h) => {
        reused = r
        handshook = h
      })
      if (reply.status === 503) return { failed: { url, failure: 'unavailable', detail: reply.errorCode ?? '503' }, retryFresh: false }
      return { reply }
    } catch (err) {
      if (!(err instanceof AttemptError)) throw err
      const failure: AttemptFailure = err.failure === 'refused' ? 'certificate_refused' : err.failure === 'connect' && handshook ? 'closed_after_handshake' : err.failure
      const failed: FailedAttempt = failure === 'busy' ? { url, failure, detail: err.message, retryAfterMs: err.retryAfterMs } : { url, failure, detail: err.message }
      return { failed, retryFresh: reused && (err.failure === 'connect' || err.failure === 'refused') }
    } finally {
      if (fresh) agent.destroy()
    }
  }

  /** One request; `seen` reports whether the socket was reused and whether a fresh handshake completed. */
  private send(url: string, agent: https.Agent, path: string, body: unknown, seen: (reused: boolean, handshook: boolean) => void): Promise<ControllerReply> {
    const payload = body === undefined ? null : JSON.stringify(body)
    const { clock } = this.opts
    const requestTimeoutMs = this.opts.requestTimeoutMs()
    return new Promise((resolve, reject) => {
      let reused = false
      let handshook = false
      let settled = false
      const req = https.request(new URL(path, url), {
        method: payload === null ? 'GET' : 'POST',
        agent,
        headers: payload === null ? { accept: 'application/json' } : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), accept: 'application/json' },
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
      if (payload === null) req.end()
      else req.end(payload)
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

/** Whether every URL was tried and every one refused the certificate. */
function refusedByEvery(pass: Pass): boolean {
  return 'failures' in pass && pass.everyUrl && pass.failures.length > 0 && pass.failures.every(isRefusal)
}

/** Maps a socket or TLS error to an attempt failure. */
function classify(err: NodeJS.ErrnoException): AttemptError {
  if (err instanceof ControllerBusyError) return new AttemptError('busy', err.message, err.retryAfterMs)
  const code = err.code ?? ''
  if (CERT_ALERT.test(code)) return new AttemptError('refused', `TLS alert ${code.replace(/^ERR_SSL_(?:[A-Z0-9/]+_)?ALERT_/, '').toLowerCase().replace(/_/g, ' ')}`)
  if (SERVER_UNTRUSTED.test(code)) return new AttemptError('server_untrusted', `the controller's certificate is not trusted (${code})`)
  return new AttemptError('connect', code || err.message.slice(0, 64))
}
