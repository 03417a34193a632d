/**
 * The enrollment listener's app (SPEC "Device enrollment and renewal"): TLS with the controller's server
 * certificate, no client certificate asked, and only two routes: `POST /v1/enroll` and
 * `GET /v1/enroll/:request_id`. Anyone can reach it, so it is bounded before any work: connections per
 * address and in total at accept time, a token bucket per source address (IPv6: per /64) before a body is
 * read, bodies of at most 16 KiB; the queue then bounds what is kept (core/enroll-queue.ts). Refusals at
 * the door are audited `enroll_refused`, limited per address. Errors have the API's one shape.
 */
import fastify, { LogController, type FastifyInstance, type FastifyServerFactory } from 'fastify'
import type { Logger } from 'pino'
import { addressKey } from '../net/address-key.js'
import type { PeerAuditLimiter } from '../audit/peer-audit-limiter.js'
import { enrollBodySchema, ENROLL_BODY_LIMIT_BYTES, EnrollRefused, requestParamsSchema } from '../service/enroll-service.js'
import type { EnrollHost } from '../service/enroll-host.js'
import type { PrincipalRateLimiter } from './principal-rate-limiter.js'
import { rateLimited } from './authenticate.js'
import { installErrorHandling } from './error-handler.js'
import { installJsonBodyParser } from './json-body.js'
import { captureSecurityHeaders } from './security-headers.js'
import { installCloseAfterStop } from '../server/graceful-close.js'

/** The two routes, for the API reference and the 404 of everything else. */
export const ENROLL_ROUTES = ['POST /v1/enroll', 'GET /v1/enroll/:request_id'] as const

export interface EnrollAppDeps {
  readonly enroll: EnrollHost
  readonly peerAudit: Pick<PeerAuditLimiter, 'record'>
  /** One bucket per source address (the role is always `enroll`). */
  readonly rateLimiter: Pick<PrincipalRateLimiter<'enroll'>, 'take'>
  readonly logger?: Logger
  readonly serverFactory?: FastifyServerFactory
}

/** Parses `value` with `schema`, or refuses (400) and audits the rule it broke. */
function parsed<T>(schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } } }, value: unknown, what: string): T {
  const result = schema.safeParse(value)
  if (result.success) return result.data
  const issue = result.error.issues[0]
  const where = issue === undefined || issue.path.length === 0 ? '' : ` at "${issue.path.map(String).join('.')}"`
  throw new EnrollRefused('shape', `invalid ${what}${where}: ${issue?.message ?? 'malformed'}`)
}

/** Builds the app; the caller listens. */
export async function buildEnrollApp(deps: EnrollAppDeps): Promise<FastifyInstance> {
  const app = fastify({
    loggerInstance: deps.logger,
    childLoggerFactory: (logger) => logger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: ENROLL_BODY_LIMIT_BYTES,
    exposeHeadRoutes: false,
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    ...(deps.serverFactory ? { serverFactory: deps.serverFactory } : {}),
  }) as unknown as FastifyInstance
  app.removeContentTypeParser('text/plain')
  installJsonBodyParser(app)
  const headers = await captureSecurityHeaders()
  app.addHook('onRequest', (request, reply, done) => {
    void reply.headers(headers)
    // before any body is read: one bucket per source address
    const limited = deps.rateLimiter.take('enroll', addressKey(request.raw.socket.remoteAddress))
    if (limited !== null) throw rateLimited(limited.retryAfterMs)
    done()
  })
  installErrorHandling(app)
  installCloseAfterStop(app)
  const source = (address: string | undefined) => address ?? 'unknown'
  const audited = async <T>(address: string | undefined, op: () => Promise<T>): Promise<T> => {
    try {
      return await op()
    } catch (err) {
      if (err instanceof EnrollRefused) deps.peerAudit.record('enroll_refused', source(address), { rule: err.rule, detail: err.message })
      throw err
    }
  }

  app.post('/v1/enroll', async (request, reply) => {
    const address = request.raw.socket.remoteAddress
    const out = await audited(address, async () => {
      const body = parsed(enrollBodySchema, request.body, 'enrollment body')
      return deps.enroll.serve((service) => service.enroll(body, source(address)))
    })
    return reply.code(202).send(out)
  })

  app.get('/v1/enroll/:request_id', async (request) => {
    const { request_id } = parsed(requestParamsSchema, request.params, 'request id')
    return deps.enroll.serve((service) => service.status(request_id))
  })
  return app
}
