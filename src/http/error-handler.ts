/** The one place errors become responses: `{error, message}`, no stack traces, no paths. */
import type { FastifyError, FastifyInstance } from 'fastify'
import { AppError, type ErrorCode } from '../errors.js'
import { BODY_LIMIT_BYTES, SESSIONS_BODY_LIMIT_BYTES } from './json-body.js'
import { CRL_BODY_LIMIT_BYTES } from './crl-body.js'
import { installRequestOutcome } from './request-outcome.js'

/** Maps a framework error (body parsing, limits) to a stable code and a safe message. */
function fromFrameworkError(err: FastifyError, bodyLimit: number | undefined): AppError {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      if (bodyLimit === CRL_BODY_LIMIT_BYTES) return new AppError('payload_too_large', `the CRL is larger than ${CRL_BODY_LIMIT_BYTES} bytes`)
      return new AppError('payload_too_large', `the request body is larger than ${BODY_LIMIT_BYTES} bytes (${SESSIONS_BODY_LIMIT_BYTES} for a check-in that carries sessions)`)
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('unsupported_media_type', 'the request body must be application/json')
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('invalid_request', 'the request body is empty')
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError('invalid_request', 'the request body is not valid JSON')
  }
  if (err instanceof SyntaxError || err.statusCode === 400) return new AppError('invalid_request', 'the request body is not valid JSON')
  const status = err.statusCode ?? 500
  const code: ErrorCode = status === 413 ? 'payload_too_large' : status === 415 ? 'unsupported_media_type' : status === 404 ? 'not_found' : status < 500 ? 'invalid_request' : 'internal_error'
  return new AppError(code, code === 'internal_error' ? 'internal error' : 'the request was refused')
}

/** Installs the error and not-found handlers on the app. */
export function installErrorHandling(app: FastifyInstance): void {
  installRequestOutcome(app)
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const appError = err instanceof AppError ? err : fromFrameworkError(err, request.routeOptions.bodyLimit)
    request.outcome = appError.code
    if (appError.statusCode >= 500 && appError.code === 'internal_error') request.log.error({ err, req_id: request.id }, 'request failed')
    void reply.headers(appError.headers).code(appError.statusCode).send({ error: appError.code, message: appError.message, ...appError.extra })
  })
  app.setNotFoundHandler((request, reply) => {
    request.outcome = 'not_found'
    void reply.code(404).send({ error: 'not_found', message: 'no such endpoint' })
  })
}
