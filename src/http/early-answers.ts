/**
 * Answers written before fastify's hooks run: URLs fastify's router refuses (a bad percent-encoding, a
 * path parameter over its maximum length) and an `Expect` header Node cannot meet. They get the same
 * `{error, message}` shape and security headers as every other answer, never echo the request, and an
 * unauthenticated client gets 401 before any routing answer (so the router's answers tell it nothing).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { AppError } from '../errors.js'
import { isPrincipal } from '../identity/principal.js'
import { authenticateSocket, rateLimited, type AuthDeps } from './authenticate.js'
import { securityHeaders } from './security-headers.js'

/** The refusal for a socket's caller: 401 without an identity, 429 over its rate, else null. */
function callerRefusal(socket: Socket, deps: AuthDeps, what: string): AppError | null {
  const who = authenticateSocket(socket, deps)
  if (!isPrincipal(who)) {
    deps.peerAudit.record('unauthenticated', socket.remoteAddress ?? 'unknown', { reason: who.reason, request: what })
    return new AppError('unauthenticated', 'a valid client certificate issued by this controller is required')
  }
  const limited = deps.rateLimiter.take(who.role, who.serial)
  if (limited !== null) {
    deps.onRateLimited?.(who.role)
    return rateLimited(limited.retryAfterMs)
  }
  return null
}

/** Writes an error answer on a raw response and closes the connection afterwards. */
function writeRaw(res: ServerResponse, err: AppError): void {
  const body = JSON.stringify({ error: err.code, message: err.message, ...err.extra })
  res.writeHead(err.statusCode, {
    ...securityHeaders(),
    ...err.headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    connection: 'close',
  })
  res.end(body)
}

/** fastify's `frameworkErrors` option: bad URLs (400) and over-long path parameters (414). */
export function frameworkErrorHandler(deps: AuthDeps) {
  return (error: Error & { code?: string }, request: FastifyRequest, reply: FastifyReply): void => {
    const tooLong = error.code === 'FST_ERR_MAX_PARAM_LENGTH'
    const refusal =
      callerRefusal(request.raw.socket, deps, tooLong ? 'over-long path parameter' : 'malformed URL') ??
      (tooLong
        ? new AppError('uri_too_long', 'a path parameter is longer than any valid value')
        : new AppError('invalid_request', 'the URL is malformed (bad percent-encoding)'))
    writeRaw(reply.raw, refusal)
  }
}

/** Node's 'checkExpectation' event: an `Expect` other than 100-continue is refused with 417. */
export function expectationHandler(deps: AuthDeps) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const refusal =
      callerRefusal(req.socket, deps, 'unsupported Expect header') ??
      new AppError('expectation_failed', 'only "Expect: 100-continue" is supported')
    writeRaw(res, refusal)
  }
}
