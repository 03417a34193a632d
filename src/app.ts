/** buildApp(deps) → the fastify app: security headers, auth, routes, error handling. No env reads, no listen. */
import fastify, { LogController, type FastifyInstance, type FastifyServerFactory } from 'fastify'
import type { Logger } from 'pino'
import { installAuth, type AuthDeps } from './http/authenticate.js'
import { handleClientError } from './http/client-error.js'
import { frameworkErrorHandler } from './http/early-answers.js'
import { installErrorHandling } from './http/error-handler.js'
import { registerRoutes, type RouteDeps } from './http/routes.js'
import { captureSecurityHeaders } from './http/security-headers.js'
import { BODY_LIMIT_BYTES, installJsonBodyParser } from './http/json-body.js'
import { installCloseAfterStop } from './server/graceful-close.js'


export interface AppDeps extends RouteDeps, AuthDeps {
  readonly logger?: Logger
  /** Creates the HTTPS server (mTLS); see src/server/tls-server.ts. */
  readonly serverFactory?: FastifyServerFactory
}

/** Builds the app; the caller listens. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = fastify({
    loggerInstance: deps.logger,
    // No pino child per request (fastify's default binds reqId that way: ~3 µs of CPU per check-in).
    // Nothing is logged per request; the one per-request line, an internal error, names req_id itself.
    childLoggerFactory: (logger) => logger,
    // Per-request logging costs ~25 % throughput; security events go to the audit log instead.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT_BYTES,
    exposeHeadRoutes: false,
    // fastify's 503 fast path answers in its own shape without helmet; a request that reaches a
    // stopping controller is served whole instead (and its connection closed after the answer).
    return503OnClosing: false,
    // Timeouts are set on the server by its factory (src/server/http-limits.ts): fastify ignores its
    // timeout options when it does not create the server itself. At close, idle keep-alive connections
    // go at once; requests in flight finish (src/server/graceful-close.ts cuts them after a deadline).
    forceCloseConnections: 'idle',
    clientErrorHandler: handleClientError,
    // Router refusals (bad URL, over-long parameter) run before any hook: answered in our shape, 401 first.
    frameworkErrors: frameworkErrorHandler(deps),
    ...(deps.serverFactory ? { serverFactory: deps.serverFactory } : {}),
  }) as unknown as FastifyInstance
  // Only JSON bodies: anything else is 415, not a string the schemas would reject as 400.
  app.removeContentTypeParser('text/plain')
  installJsonBodyParser(app)
  // helmet's header set, computed once (see security-headers.ts); set first, so errors and 401s carry it too.
  const headers = await captureSecurityHeaders()
  app.addHook('onRequest', (_request, reply, done) => {
    void reply.headers(headers)
    done()
  })
  installErrorHandling(app)
  installAuth(app, deps)
  installCloseAfterStop(app)
  registerRoutes(app, deps)
  return app
}
