/**
 * The body of POST /v1/crl: a PEM CRL, as `application/pkix-crl` or `application/x-pem-file`. The media
 * type is checked before the body is read (anything else is 415 at once), and the body has its own limit.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { AppError } from '../errors.js'

/** The largest CRL body taken: ~19,000 revocations in PEM, and within one etcd request in HA. */
export const CRL_BODY_LIMIT_BYTES = 1024 * 1024

/** The media types a pushed CRL may come as (the SPEC's two). */
export const CRL_MEDIA_TYPES = ['application/pkix-crl', 'application/x-pem-file'] as const

/** Registers the parsers of the CRL media types on `scope` (the CRL route's own): the body as text (the PEM), within the route's limit. */
export function installCrlBodyParser(app: FastifyInstance): void {
  app.addContentTypeParser([...CRL_MEDIA_TYPES], { parseAs: 'string' }, (_request, body, done) => done(null, body))
}

/** preParsing of POST /v1/crl: 415 before any byte of a body of another media type is read. */
export async function assertCrlMediaType(request: FastifyRequest): Promise<void> {
  const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase()
  if (!(CRL_MEDIA_TYPES as readonly string[]).includes(type)) {
    throw new AppError('unsupported_media_type', `the CRL must be sent as ${CRL_MEDIA_TYPES.join(' or ')} (PEM)`)
  }
}

/** The PEM text of a parsed CRL body; 400 when there is none. */
export function crlBodyText(body: unknown): string {
  if (typeof body !== 'string' || body.trim() === '') throw new AppError('invalid_request', 'the request body is empty: expected a PEM CRL ("X509 CRL" block)')
  return body
}
