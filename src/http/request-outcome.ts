/**
 * What a request came to, beyond its status, for the metrics (src/ops/request-metrics.ts): the error
 * code it was refused with, or an Identify claim's result. Null for a plain success.
 */
import type { FastifyInstance } from 'fastify'
import type { ErrorCode } from '../errors.js'
import type { IdentifyOutcome } from '../core/types.js'

/** An error code, or how an Identify claim was answered. */
export type RequestOutcome = ErrorCode | 'granted' | 'resumed' | Extract<IdentifyOutcome, { granted: false }>['reason']

declare module 'fastify' {
  interface FastifyRequest {
    outcome: RequestOutcome | null
  }
}

/** Adds `request.outcome` (null until the error handler or a route sets it). */
export function installRequestOutcome(app: FastifyInstance): void {
  app.decorateRequest('outcome', null)
}
