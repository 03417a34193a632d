/**
 * The mTLS HTTPS server under fastify: trusts only our CA, TLS ≥ 1.2 with ECDHE + AEAD suites, no
 * renegotiation. It logs refused handshakes with OpenSSL's own reason, tracks open connections so a
 * revocation can close them, and swaps its secure context (with new session-ticket keys) when the CRL
 * changes.
 */
import https from 'node:https'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { TLSSocket } from 'node:tls'
import type { FastifyServerFactory } from 'fastify'
import type { Logger } from 'pino'
import { buildSecureContextOptions } from '../identity/tls-crl.js'
import { applyServerDeadlines, SERVER_LIMIT_OPTIONS } from './http-limits.js'
import { isPrincipal, principalOfSocket, type Principal } from '../identity/principal.js'
import type { PeerAuditLimiter } from '../audit/peer-audit-limiter.js'
import { ConnectionCaps, type ConnectionLimits } from './connection-caps.js'
import { DEFAULT_ADMISSION, HandshakeAdmission, type AdmissionOptions } from './admission.js'
import { busyNotice } from '../net/busy-notice.js'
import type { TicketKeys } from './ticket-keys.js'

export interface TlsMaterial {
  readonly ca: string
  readonly cert: string
  readonly key: string
  readonly crlPem: string
}

export interface TlsServerDeps {
  readonly logger?: Logger
  /** The session-ticket keys in force; rotated here on every CRL change. */
  readonly ticketKeys: Pick<TicketKeys, 'current' | 'rotate'>
  /** Audits refused handshakes, limited per peer address. */
  readonly peerAudit: Pick<PeerAuditLimiter, 'record'>
  /** Open connections allowed per source address and in total (dropped at accept time). */
  readonly connectionLimits: ConnectionLimits
  /** Told the raw code of every refused handshake (OpenSSL verify code, else Node's error code), for metrics. */
  readonly onHandshakeFailure?: (code: string | undefined) => void
  /** Told, for every admitted connection whose handshake completed, the seconds from accept to its end. */
  readonly onHandshakeDone?: (seconds: number) => void
  /** Answers a request whose `Expect` header Node cannot meet (instead of Node's bare 417). */
  readonly onUnmetExpectation?: (req: IncomingMessage, res: ServerResponse) => void
  /**
   * Whether this replica serves requests now (HA: leads with its state loaded; default: always). Admission
   * measures its cost only while it does, and starts from its initial estimate when it begins to
   * (noticed at the end of the 250 ms window).
   */
  readonly isServing?: () => boolean
  /** Admission under a reconnect storm (server/admission.ts); the defaults unless a test sets its own. */
  readonly admission?: Partial<Omit<AdmissionOptions, 'now'>>
}

/** How often the event loop's utilization is read for admission (ms). */
const ADMISSION_WINDOW_MS = 250
/** A deferred client that does not close after the notice is cut off after this (ms). */
const DEFERRED_LINGER_MS = 2000

/** The raw TCP socket under a TLS socket. */
function rawOf(socket: TLSSocket): Socket | undefined {
  return (socket as TLSSocket & { _parent?: Socket })._parent
}

/** The peer address of a socket whose handshake failed (primed on 'connection', see below). */
function peerOf(socket: TLSSocket): string {
  return socket.remoteAddress ?? rawOf(socket)?.remoteAddress ?? 'unknown'
}

/**
 * Answers a deferred connection with the busy notice and closes it. What the client sent (its
 * ClientHello) is read and dropped, so that the close is a FIN after the notice, never a reset that
 * could discard the notice before the client reads it.
 */
function deferConnection(raw: Socket, retryAfterMs: number): void {
  raw.on('error', () => undefined)
  raw.on('data', () => undefined)
  // A hard deadline, not an idle timeout: a peer trickling bytes must not keep a deferred socket open.
  const linger = setTimeout(() => raw.destroy(), DEFERRED_LINGER_MS)
  linger.unref()
  raw.once('close', () => clearTimeout(linger))
  raw.end(busyNotice(retryAfterMs))
}

/** Owns the HTTPS server: hand `factory` to fastify, then use the methods at run time. */
export class TlsServer {
  private server: https.Server | undefined
  private readonly open = new Set<TLSSocket>()
  /** Raw sockets whose TLS handshake has not finished (the HTTP layer does not know them yet), with when they were admitted (performance.now()). */
  private readonly handshaking = new Map<Socket, number>()
  /** Set at stop: handshakes we cut ourselves are not a peer's fault and are not audited. */
  private stopping = false
  private material: TlsMaterial
  /** Connection caps, applied before any TLS work. */
  readonly caps: ConnectionCaps
  /** Defers new connections the event loop could not finish in time (a reconnect storm). */
  readonly admission: HandshakeAdmission

  constructor(material: TlsMaterial, private readonly deps: TlsServerDeps) {
    this.material = material
    this.caps = new ConnectionCaps(deps.connectionLimits, (address, reason) => deps.peerAudit.record('connection_refused', address, { reason }))
    this.admission = new HandshakeAdmission({ ...DEFAULT_ADMISSION, ...deps.admission, now: () => performance.now() })
  }

  private contextOptions(crlPem = this.material.crlPem, ticketKeys = this.deps.ticketKeys.current): https.ServerOptions {
    return buildSecureContextOptions({ ca: this.material.ca, cert: this.material.cert, key: this.material.key, crlPem, ticketKeys })
  }

  /** fastify's serverFactory: builds the HTTPS server with client certificates required. */
  readonly factory: FastifyServerFactory = (handler) => {
    const server = https.createServer(
      {
        ...this.contextOptions(),
        requestCert: true,
        rejectUnauthorized: true,
        ...SERVER_LIMIT_OPTIONS,
      },
      handler,
    )
    applyServerDeadlines(server)
    this.caps.attach(server)
    if (this.deps.onUnmetExpectation) server.on('checkExpectation', this.deps.onUnmetExpectation)
    this.gateHandshakes(server)
    server.on('secureConnection', (socket: TLSSocket) => {
      const raw = rawOf(socket)
      const admittedAt = raw === undefined ? undefined : this.handshaking.get(raw)
      if (raw !== undefined && admittedAt !== undefined) {
        this.handshaking.delete(raw)
        this.admission.finished()
        // From accept to established: queued behind other handshakes, or a slow (or lagging) peer
        this.deps.onHandshakeDone?.((performance.now() - admittedAt) / 1000)
      }
      socket.disableRenegotiation()
      this.open.add(socket)
      socket.once('close', () => this.open.delete(socket))
    })
    server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: TLSSocket) => {
      if (this.stopping || this.caps.wasDropped(rawOf(socket))) return
      const code = socket.authorizationError?.toString() ?? err.code
      this.deps.onHandshakeFailure?.(code)
      const reason = code ?? err.message
      const peer = peerOf(socket)
      // Logged through the limiter (runtime.ts mirrors written lines): a flood writes a few lines, then a count.
      this.deps.peerAudit.record('tls_rejected', peer, { reason })
    })
    this.server = server
    return server as unknown as ReturnType<FastifyServerFactory>
  }

  /**
   * Puts admission in front of Node's own TLS listener, which would start the handshake of every
   * accepted socket: a socket the caps dropped never reaches it, and one admission defers gets the busy
   * notice instead (no TLS object is ever made for it). Admitted sockets are tracked until their
   * handshake ends, which is both what admission counts and what a stop must cut.
   */
  private gateHandshakes(server: https.Server): void {
    const startTls = server.listeners('connection').filter((l) => l.name === 'tlsConnectionListener')
    if (startTls.length !== 1) throw new Error("cannot find Node's TLS connection listener to put admission in front of it")
    const tlsListener = startTls[0] as (raw: Socket) => void
    server.removeListener('connection', tlsListener)
    server.on('connection', (raw: Socket) => {
      if (this.caps.wasDropped(raw)) return
      // Appointments are kept per source address. (Reading remoteAddress now also caches it on the raw
      // socket: after a refused handshake the TLS socket is already destroyed and can no longer tell.)
      const decision = this.admission.decide(this.handshaking.size, raw.remoteAddress)
      if (!decision.admit) return deferConnection(raw, decision.retryAfterMs)
      this.handshaking.set(raw, performance.now())
      raw.once('close', () => {
        if (this.handshaking.delete(raw)) this.admission.finished()
      })
      tlsListener.call(server, raw)
    })
    let last = performance.eventLoopUtilization()
    const window = setInterval(() => {
      const now = performance.eventLoopUtilization()
      this.admission.endWindow(ADMISSION_WINDOW_MS, performance.eventLoopUtilization(now, last).utilization, this.deps.isServing?.() ?? true, this.unansweredSince(performance.now() - this.admission.budgetMs))
      last = now
    }, ADMISSION_WINDOW_MS)
    window.unref()
    server.once('close', () => clearInterval(window))
  }

  /**
   * Admitted connections still in their handshake, admitted at `since` or later, that the controller
   * has not answered: nothing written back, so no whole ClientHello has arrived and the work it brings
   * is still to come (a client that sent part of one and stopped counts here too). One that was
   * answered waits for its client: TLS handles what arrives in the turn it arrives, and the answer to a
   * ClientHello is written at once. Counted once a window (250 ms), over the handshakes in flight,
   * which the connection caps bound.
   */
  private unansweredSince(since: number): number {
    let unanswered = 0
    for (const [raw, admittedAt] of this.handshaking) if (admittedAt >= since && raw.bytesWritten === 0) unanswered += 1
    return unanswered
  }

  /**
   * Installs a new CRL for new handshakes, with new ticket keys so that no session from before resumes
   * (resumption skips the CRL check). Throws when OpenSSL refuses the context: then nothing changed.
   */
  updateCrl(crlPem: string): void {
    this.deps.ticketKeys.rotate('crl_changed', (ticketKeys) => this.server?.setSecureContext(this.contextOptions(crlPem, ticketKeys)), crlPem)
    this.material = { ...this.material, crlPem }
  }

  /** Puts new session-ticket keys in force (a rotation by age; the CRL is unchanged). */
  installTicketKeys(keys: Buffer): void {
    this.server?.setTicketKeys(keys)
  }

  /** Closes every open connection whose principal matches; returns how many were closed. */
  closeConnections(match: (principal: Principal) => boolean): number {
    let closed = 0
    for (const socket of this.open) {
      const who = principalOfSocket(socket)
      if (isPrincipal(who) && match(who)) {
        socket.destroy()
        closed++
      }
    }
    return closed
  }

  /**
   * At stop: destroys connections still in their TLS handshake. fastify closes the HTTP connections it
   * knows; a socket that never finished its handshake would otherwise hold the close for up to the
   * handshake timeout. Handshakes failing from here on are ours, not refusals, so they are not audited.
   */
  destroyUnverified(): number {
    this.stopping = true
    const count = this.handshaking.size
    for (const raw of this.handshaking.keys()) raw.destroy()
    this.handshaking.clear()
    return count
  }

  /** Admitted connections whose TLS handshake has not ended yet (what admission counts as its queue). */
  get handshakesInFlight(): number {
    return this.handshaking.size
  }

  /** How many TLS connections are open (for tests and the stop log). */
  get openConnections(): number {
    return this.open.size
  }
}
