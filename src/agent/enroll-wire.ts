/** zod schemas of the controller's enrollment and renewal answers (SPEC "Device enrollment and renewal"). */
import { z } from 'zod'

const PEM_CERT = /^-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----\r?\n?$/
const cert = z.string().max(16 * 1024).regex(PEM_CERT, 'must be one PEM certificate')

/** `POST /v1/enroll` and `POST /v1/renew` answer 202. */
export const requestQueuedSchema = z
  .object({ request_id: z.string().regex(/^[A-Za-z0-9_-]{22}$/), poll_after_ms: z.number().int().min(0).max(3_600_000) })
  .strict()

/** `GET /v1/enroll/:id` and `GET /v1/renew/:id` answer 200. */
export const requestStatusSchema = z.discriminatedUnion('status', [
  z.object({ status: z.literal('pending') }).strict(),
  // a renewal's answer may leave out the CA and the plan keys: the node has them
  z.object({ status: z.literal('issued'), certificate: cert, ca: cert.optional(), plan_jwks: z.unknown().optional() }).strict(),
  z.object({ status: z.literal('denied'), reason: z.string().max(1024) }).strict(),
])

export type RequestStatus = z.infer<typeof requestStatusSchema>

/** How long to wait before the next poll: as told, within 0.2 s..60 s. */
export function pollDelayMs(toldMs: number): number {
  return Math.min(60_000, Math.max(200, toldMs))
}
