/**
 * The enrollment listener's HTTPS server: the controller's own server certificate, TLS >= 1.2 with the
 * mTLS listener's suites, and no client certificate asked (a node enrolling has none yet). Connections
 * are capped per source address and in total at accept time, as on the mTLS listener, and the same
 * request deadlines apply (headers 5 s, request 10 s).
 */
import https from 'node:https'
import type { TLSSocket } from 'node:tls'
import type { FastifyServerFactory } from 'fastify'
import { CIPHERS } from '../identity/tls-crl.js'
import type { PeerAuditLimiter } from '../audit/peer-audit-limiter.js'
import { ConnectionCaps, type ConnectionLimits } from './connection-caps.js'
import { applyServerDeadlines, SERVER_LIMIT_OPTIONS } from './http-limits.js'
import { constants } from 'node:crypto'

export interface EnrollServerDeps {
  readonly cert: string
  readonly key: string
  readonly connectionLimits: ConnectionLimits
  readonly peerAudit: Pick<PeerAuditLimiter, 'record'>
}

/** Owns the enrollment listener's HTTPS server (hand `factory` to fastify). */
export class EnrollServer {
  private server: https.Server | undefined
  private readonly open = new Set<TLSSocket>()
  readonly caps: ConnectionCaps

  constructor(private readonly deps: EnrollServerDeps) {
    this.caps = new ConnectionCaps(deps.connectionLimits, (address, reason) => deps.peerAudit.record('connection_refused', address, { reason, listener: 'enroll' }))
  }

  readonly factory: FastifyServerFactory = (handler) => {
    const server = https.createServer(
      {
        cert: this.deps.cert,
        key: this.deps.key,
        minVersion: 'TLSv1.2',
        ciphers: CIPHERS,
        honorCipherOrder: true,
        secureOptions: constants.SSL_OP_NO_RENEGOTIATION | constants.SSL_OP_NO_COMPRESSION,
        requestCert: false,
        ...SERVER_LIMIT_OPTIONS,
      },
      handler,
    )
    applyServerDeadlines(server)
    this.caps.attach(server)
    server.on('secureConnection', (socket: TLSSocket) => {
      socket.disableRenegotiation()
      this.open.add(socket)
      socket.once('close', () => this.open.delete(socket))
    })
    this.server = server
    return server as unknown as ReturnType<FastifyServerFactory>
  }

  /** Open connections (a stop cuts what the grace period left). */
  get openConnections(): number {
    return this.open.size
  }

  /** Cuts every open connection (the stop's last step). */
  destroyAll(): void {
    for (const socket of this.open) socket.destroy()
  }
}
