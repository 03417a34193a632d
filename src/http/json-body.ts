/**
 * The JSON body parser, counting the bytes it parsed: a check-in may be up to 64 KiB only when it
 * deposits sessions (SPEC "Check-in": 4 KiB otherwise), which is known only once the body is parsed.
 * fastify's own JSON parser (prototype-poisoning checks included) does the parsing.
 */
import type { FastifyInstance } from 'fastify'
import { AppError } from '../errors.js'

/** Every body but a check-in that carries `sessions`. */
export const BODY_LIMIT_BYTES = 4096
/** A check-in that deposits sessions (at most 128 of them, each a few hundred bytes). */
export const SESSIONS_BODY_LIMIT_BYTES = 65_536

declare module 'fastify' {
  interface FastifyRequest {
    /** Bytes of the parsed JSON body (0 without one). */
    bodyBytes: number
  }
}

/** Replaces the JSON parser by one that records `request.bodyBytes`. */
export function installJsonBodyParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error')
  app.decorateRequest('bodyBytes', 0)
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    request.bodyBytes = body.length
    parse(request, body as unknown as string, done)
  })
}

/** 413 for a check-in over 4 KiB that deposits no sessions (its route admits 64 KiB for those that do). */
export function assertCheckinBodySize(body: unknown, bytes: number): void {
  if (bytes <= BODY_LIMIT_BYTES) return
  // Only a check-in that really deposits (a non-empty list) gets the larger limit, not one that names the key.
  if (typeof body === 'object' && body !== null && Array.isArray((body as { sessions?: unknown }).sessions) && (body as { sessions: unknown[] }).sessions.length > 0) return
  throw new AppError('payload_too_large', `the check-in body is larger than ${BODY_LIMIT_BYTES} bytes (${SESSIONS_BODY_LIMIT_BYTES} for one that carries sessions)`)
}
