/**
 * An https.Agent whose connections notice the controller's "busy, come back in X" (net/busy-notice.ts):
 * a controller in a reconnect storm answers a connection it cannot serve in time with one plaintext
 * line instead of a TLS handshake. Node's TLS client would only say "wrong version number", so each
 * connection runs TLS over a small stream that looks at the first bytes the controller sends: a busy
 * notice ends the attempt with a ControllerBusyError carrying the appointment; anything else passes
 * through to TLS untouched. (One connection per controller URL: the extra stream costs nothing that
 * matters on a node.)
 */
import https from 'node:https'
import net from 'node:net'
import tls from 'node:tls'
import { Duplex } from 'node:stream'
import { BUSY_NOTICE_MAX_BYTES, looksLikeBusyNotice, parseBusyNotice } from '../net/busy-notice.js'

/** The controller deferred this connection: come back in `retryAfterMs` (null: the notice was garbled). */
export class ControllerBusyError extends Error {
  override readonly name = 'ControllerBusyError'
  readonly code = 'PXE_CONTROLLER_BUSY'
  constructor(readonly retryAfterMs: number | null) {
    super(retryAfterMs === null ? 'the controller is busy (no appointment given)' : `the controller is busy: come back in ${retryAfterMs} ms`)
  }
}

/**
 * The raw TCP connection under TLS, with the first server bytes inspected before TLS sees them: a busy
 * notice destroys the stream with a ControllerBusyError (also before any TLS socket is put on it).
 */
export function inspectingStream(raw: net.Socket): Duplex {
  let decided = false
  let notice: Buffer = Buffer.alloc(0)
  const stream = new Duplex({
    read() {
      raw.resume()
    },
    write(chunk: Buffer, _encoding, callback) {
      raw.write(chunk, callback)
    },
    final(callback) {
      raw.end()
      callback()
    },
    destroy(err, callback) {
      raw.destroy()
      callback(err)
    },
  })
  const busy = () => stream.destroy(new ControllerBusyError(parseBusyNotice(notice)))
  raw.on('data', (chunk: Buffer) => {
    if (!decided) {
      if (notice.length === 0 && !looksLikeBusyNotice(chunk)) decided = true
      else {
        // A notice is one short line; wait for all of it (it may come in pieces), never for more.
        notice = Buffer.concat([notice, chunk])
        if (notice.includes(0x0a) || notice.length >= BUSY_NOTICE_MAX_BYTES) busy()
        return
      }
    }
    if (!stream.push(chunk)) raw.pause()
  })
  raw.on('end', () => (notice.length > 0 && !decided ? busy() : stream.push(null)))
  raw.on('error', (err) => stream.destroy(err))
  raw.on('close', () => {
    if (!stream.destroyed) stream.destroy()
  })
  return stream
}

/** Sockets of these agents whose TLS handshake has completed. */
const established = new WeakSet<object>()

/**
 * The newest TLS session any controller of one deployment gave a node, shared by the agents of its
 * controller URLs. HA replicas share their session-ticket keys (SECURITY.md "Keys"), so a session made
 * with the old leader resumes on the new one; but https.Agent caches sessions per host and port, and a
 * node keeps one agent per URL, so without this every node would make a full handshake with a new leader
 * (a take-over of 10,000 nodes is then a storm of full handshakes). A session is offered to another URL
 * only when the certificate it was made with is valid for that URL's host, since a resumed connection is
 * checked against that certificate; offering a ticket to a server without the keys costs nothing (it
 * falls back to a full handshake) and tells it nothing.
 */
export class SharedSessions {
  private latest: { readonly session: Buffer; readonly cert: tls.PeerCertificate } | null = null

  /** The session to offer a connection to `host`, or undefined (then https.Agent's own cache decides). */
  sessionFor(host: string): Buffer | undefined {
    if (this.latest === null) return undefined
    return tls.checkServerIdentity(host, this.latest.cert) === undefined ? this.latest.session : undefined
  }

  /** Notes a session a controller gave `socket` (with the certificate it was made with). */
  note(socket: tls.TLSSocket, session: Buffer): void {
    const cert = socket.getPeerCertificate()
    if (cert !== null && typeof cert === 'object' && cert.raw !== undefined) this.latest = { session, cert }
  }
}

/** An https.Agent (keep-alive as configured) whose connections read a busy notice. */
export class BusyAwareAgent extends https.Agent {
  /**
   * Whether `socket` finished its handshake before now (a kept-alive connection), as opposed to one still
   * connecting. (`socket.connecting` cannot tell: TLS over a stream is never "connecting".)
   */
  static isEstablished(socket: object): boolean {
    return established.has(socket)
  }

  /** @param sessions shared by the agents of one deployment's controller URLs (see SharedSessions) */
  constructor(
    options: https.AgentOptions,
    private readonly sessions: SharedSessions | null = null,
  ) {
    super(options)
  }

  override createConnection(options: https.RequestOptions & tls.ConnectionOptions, callback?: (err: Error | null, stream: Duplex) => void): Duplex {
    const host = options.host ?? 'localhost'
    const tcp = { host, port: Number(options.port ?? 443), noDelay: true, ...(options.localAddress ? { localAddress: options.localAddress } : {}) }
    // Node's own createConnection with our stream as the socket: it keeps the agent's TLS session cache
    // (a reconnect resumes the session, a cheap handshake, which is what a reconnect storm needs); the
    // deployment's newest session, when there is one for this host, goes first (it wins over that cache).
    const shared = this.sessions?.sessionFor(options.servername || host)
    const withStream = { ...options, ...(shared === undefined ? {} : { session: shared }), socket: inspectingStream(net.connect(tcp)) } as https.RequestOptions
    const socket = super.createConnection(withStream, callback) as tls.TLSSocket
    socket.once('secureConnect', () => established.add(socket))
    if (this.sessions !== null) socket.on('session', (session: Buffer) => this.sessions?.note(socket, session))
    return socket
  }
}

/** A TLS connection over TCP to `tcp` whose first server bytes are checked for a busy notice (ControllerBusyError). */
export function connectBusyAware(tcp: net.TcpNetConnectOpts, options: tls.ConnectionOptions): tls.TLSSocket {
  // No Nagle on the TCP socket itself: TLS over a stream cannot pass setNoDelay down, and a check-in is
  // one small write waiting for one small answer.
  return tls.connect({ ...options, socket: inspectingStream(net.connect({ ...tcp, noDelay: true })) })
}
