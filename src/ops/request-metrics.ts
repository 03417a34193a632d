/** Counts every answered mTLS API request: route pattern, status, duration and the result it came to. */
import type { FastifyInstance } from 'fastify'
import { routePatternOf } from '../http/authenticate.js'
import type { ControllerMetrics } from './metrics.js'

/** Installs the onResponse hook (callback style: no promise per request). */
export function installRequestMetrics(app: FastifyInstance, metrics: ControllerMetrics): void {
  app.addHook('onResponse', (request, reply, done) => {
    metrics.observeRequest(routePatternOf(request), reply.statusCode, reply.elapsedTime, request.outcome)
    done()
  })
}
