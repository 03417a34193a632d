/**
 * One onRequest hook: the connection's peer becomes a principal through the identity seam (by default
 * the TLS client certificate, cached per socket), is re-checked on every request against the live
 * revocation set and its validity period, then the policy table decides. The early answers
 * (early-answers.ts) authenticate through the same function.
 */
import type { Socket } from 'node:net'
import type { TLSSocket } from 'node:tls'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { AppError } from '../errors.js'
import { isPrincipal, principalOfSocket, type IdentityFailure, type Principal, type Role } from '../identity/principal.js'
import type { PrincipalRateLimiter } from './principal-rate-limiter.js'
import { rolesFor } from '../identity/policy.js'
import type { PeerAuditLimiter } from '../audit/peer-audit-limiter.js'
import type { AuditSink } from '../audit/audit-sink.js'

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal
    /**
     * The route pattern (undefined: no route matched), read once by the auth hook for everything after it:
     * fastify's `routeOptions` getter builds a fresh object on every read. Null until the hook ran.
     */
    routePattern: string | undefined | null
  }
}

/** The route pattern of a request: the one the auth hook kept, or (before it ran) fastify's. */
export function routePatternOf(request: FastifyRequest): string | undefined {
  return request.routePattern === null ? request.routeOptions.url : request.routePattern
}

/** Who the peer of a connection is (the identity seam); a failure is answered 401 and audited. */
export type Identify = (socket: Socket) => Principal | IdentityFailure

/** The default identity: the TLS client certificate the handshake verified under our CA. */
export const tlsPeerIdentity: Identify = (socket) => {
  const tls = socket as TLSSocket
  if (typeof tls.getPeerCertificate !== 'function') return { reason: 'not a TLS connection' }
  return principalOfSocket(tls)
}

export interface AuthDeps {
  /**
   * The identity seam (default: `tlsPeerIdentity`). Only tests replace it, to drive the routes with
   * `app.inject`; revocation and validity are still checked here on whatever it returns.
   */
  readonly identify?: Identify
  readonly isRevoked: (serial: string) => boolean
  readonly wallClock: () => number
  readonly audit: AuditSink
  /** Audits refused requests, limited per peer so a flood cannot fill the disk. */
  readonly peerAudit: Pick<PeerAuditLimiter, 'record'>
  /** Per-certificate token buckets, checked right after authentication (before any body is read). */
  readonly rateLimiter: Pick<PrincipalRateLimiter<Role>, 'take'>
  /** Told about every rate-limited request (metrics). */
  readonly onRateLimited?: (role: Role) => void
}

/** The 429 answer: `retry_after_ms` in the body, `Retry-After` in whole seconds rounded up. */
export function rateLimited(retryAfterMs: number): AppError {
  return new AppError(
    'rate_limited',
    'too many requests from this certificate; wait before retrying',
    { retry_after_ms: retryAfterMs },
    { 'retry-after': String(Math.ceil(retryAfterMs / 1000)) },
  )
}

/** Resolves the caller of a request, or why it gets no service. */
export function authenticateSocket(socket: Socket, deps: AuthDeps): Principal | IdentityFailure {
  const found = (deps.identify ?? tlsPeerIdentity)(socket)
  if (!isPrincipal(found)) return found
  if (deps.isRevoked(found.serial)) return { reason: 'the certificate is revoked' }
  const now = deps.wallClock()
  if (now < found.notBefore || now > found.notAfter) return { reason: 'the certificate is outside its validity period' }
  return found
}

/**
 * Installs authentication and authorization for every route, the 404 route included. Callback style
 * (a refusal is thrown, and fastify's hook runner hands it to the error handler): no promise per request.
 */
export function installAuth(app: FastifyInstance, deps: AuthDeps): void {
  app.decorateRequest('principal', null as unknown as Principal)
  app.decorateRequest('routePattern', null)
  app.addHook('onRequest', (request, reply, done) => {
    const pattern = request.routeOptions.url
    request.routePattern = pattern
    const socket = request.raw.socket
    const who = authenticateSocket(socket, deps)
    if (!isPrincipal(who)) {
      const peer = socket.remoteAddress ?? 'unknown'
      deps.peerAudit.record('unauthenticated', peer, { reason: who.reason, method: request.method, path: pattern ?? null })
      void reply.header('connection', 'close')
      throw new AppError('unauthenticated', 'a valid client certificate issued by this controller is required')
    }
    request.principal = who
    const limited = deps.rateLimiter.take(who.role, who.serial)
    if (limited !== null) {
      deps.onRateLimited?.(who.role)
      throw rateLimited(limited.retryAfterMs)
    }
    const roles = pattern === undefined ? null : rolesFor(request.method, pattern)
    if (roles === null) throw new AppError('not_found', 'no such endpoint')
    if (!roles.includes(who.role)) throw new AppError('forbidden', `role "${who.role}" may not call ${request.method} ${pattern}`)
    done()
  })
}
