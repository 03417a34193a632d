/**
 * The ops listener's endpoints described for the API reference (src/http/openapi.ts): one entry per path
 * of OPS_PATHS, which is what ops-server.ts serves, so that a path added there does not compile until it
 * is described here. The answers' schemas are checked against real answers by test/http/openapi.test.ts.
 */
import { Registry } from 'prom-client'
import { z } from 'zod'
import type { ErrorCode } from '../errors.js'
import type { OpsPath } from './ops-server.js'
import { NOT_READY_REASONS } from './readiness.js'

/** `GET /healthz` 200. */
export const healthAnswerSchema = z.object({ status: z.literal('ok') }).strict()

/** `GET /readyz` 200. */
export const readyAnswerSchema = z.object({ status: z.literal('ready') }).strict()

/** `GET /readyz` 503: the checks that fail, each once, in a fixed order. */
export const notReadyAnswerSchema = z.object({ status: z.literal('not_ready'), reasons: z.array(z.enum(NOT_READY_REASONS)).min(1) }).strict()

/** One answer of an ops endpoint: a JSON schema, or text of a media type. */
export interface OpsAnswerDoc {
  readonly description: string
  readonly mediaType: string
  /** The JSON answer's schema and its name in the reference; null: not JSON (the Prometheus text). */
  readonly schema: { readonly name: string; readonly zod: z.ZodType } | null
}

/** What the reference says of one ops endpoint (every one is a GET without a body). */
export interface OpsEndpointDoc {
  readonly operationId: string
  readonly summary: string
  readonly description: string
  readonly answers: Readonly<Record<number, OpsAnswerDoc>>
  /** Refusals, in the `{error, message}` shape: any request that carries a body is refused. */
  readonly errors: readonly ErrorCode[]
}

const JSON_TYPE = 'application/json'

/** Every path of the ops listener, described. */
export const OPS_ENDPOINT_DOCS: Readonly<Record<OpsPath, OpsEndpointDoc>> = {
  '/metrics': {
    operationId: 'metrics',
    summary: 'Prometheus metrics',
    description: 'Every pxe_* metric and the default process metrics, in the Prometheus text format. Labels never carry node IDs.',
    answers: { 200: { description: 'the metrics', mediaType: Registry.PROMETHEUS_CONTENT_TYPE, schema: null } },
    errors: ['payload_too_large', 'internal_error'],
  },
  '/healthz': {
    operationId: 'health',
    summary: 'Liveness',
    description: 'Answers while the process serves its event loop.',
    answers: { 200: { description: 'alive', mediaType: JSON_TYPE, schema: { name: 'Health', zod: healthAnswerSchema } } },
    errors: ['payload_too_large'],
  },
  '/readyz': {
    operationId: 'readiness',
    summary: 'Readiness: can the controller serve nodes correctly now',
    description: 'Ready when the state is durable, the mTLS listener is up, the CRL is not past nextUpdate, no graceful stop runs and (HA) this replica leads.',
    answers: {
      200: { description: 'ready', mediaType: JSON_TYPE, schema: { name: 'Ready', zod: readyAnswerSchema } },
      503: { description: 'not ready, with the reasons', mediaType: JSON_TYPE, schema: { name: 'NotReady', zod: notReadyAnswerSchema } },
    },
    errors: ['payload_too_large'],
  },
}
