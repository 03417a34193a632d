/**
 * The mTLS API described as data, one entry per endpoint of the policy table (identity/policy.ts), which
 * is what the server authorizes against: a route missing from it answers 404 to everyone, and an endpoint
 * added to it does not compile until it is described here. routes.ts parses with the same param and body
 * schemas; openapi.ts turns this table into docs/openapi.json.
 */
import { z } from 'zod'
import type { ErrorCode } from '../errors.js'
import type { Endpoint } from '../identity/policy.js'
import { nameSchema } from '../core/names.js'
import { CANONICAL_DECIMAL } from '../core/snowflake.js'
import { checkinBodySchema, drainBodySchema, identifyBodySchema, reshardBodySchema } from '../core/schemas.js'
import { BODY_LIMIT_BYTES, SESSIONS_BODY_LIMIT_BYTES } from './json-body.js'
import { CRL_BODY_LIMIT_BYTES, CRL_MEDIA_TYPES } from './crl-body.js'
import { decisionBodySchema, ENROLL_BODY_LIMIT_BYTES, renewBodySchema, requestParamsSchema, signerListQuerySchema } from '../service/enroll-service.js'
import * as answers from './answer-schemas.js'

/** `GET /v1/route/:guild_id` path parameters; the snowflake rule is checked by the core (parseGuildId). */
export const guildParamsSchema = z
  .object({ guild_id: z.string().meta({ pattern: CANONICAL_DECIMAL.source, description: 'a Discord guild ID: canonical decimal, at most 2^64 - 1' }) })
  .strict()

/** `POST /v1/nodes/:node_id/drain` path parameters. */
export const nodeParamsSchema = z.object({ node_id: nameSchema }).strict()

/** A request body: its media types, schema (JSON bodies) and size limit. */
export interface BodyDoc {
  readonly mediaTypes: readonly string[]
  /** null: not JSON (the CRL's PEM text). */
  readonly schema: z.ZodType | null
  readonly limitBytes: number
  readonly description: string
}

/** What the reference says of one endpoint beyond its method, path and roles. */
export interface EndpointDoc {
  readonly operationId: string
  readonly summary: string
  readonly description: string
  readonly params?: z.ZodObject
  /** Query parameters (every one optional). */
  readonly query?: z.ZodObject
  readonly body?: BodyDoc
  readonly answer: { readonly status: 200 | 202; readonly schema: z.ZodType; readonly description: string }
  /** Refusals of this endpoint, beyond those of every endpoint (COMMON_ERRORS). */
  readonly errors: readonly ErrorCode[]
}

/** Refusals any endpoint can give: no valid certificate, a role the policy does not allow, over the rate. */
export const COMMON_ERRORS: readonly ErrorCode[] = ['unauthenticated', 'forbidden', 'rate_limited']

/** Refusals of an endpoint served by the state: an HA follower, or state that cannot be made durable. */
const STATE = ['not_leader', 'unavailable'] as const satisfies readonly ErrorCode[]
/** Refusals of a JSON body. */
const JSON_BODY = ['invalid_request', 'payload_too_large', 'unsupported_media_type'] as const satisfies readonly ErrorCode[]

const json = (schema: z.ZodType, description: string, limitBytes = BODY_LIMIT_BYTES): BodyDoc => ({ mediaTypes: ['application/json'], schema, limitBytes, description })

/** Every endpoint of the policy table, described. */
export const ENDPOINT_DOCS: Readonly<Record<Endpoint, EndpointDoc>> = {
  'POST /v1/checkin': {
    operationId: 'checkIn',
    summary: 'Check in: renew the lease, report health, get the signed plan',
    description:
      "A node reports its capacity and shard health every lease_seconds / 3 and gets its range and a signed plan. The body's node_id must be the certificate's CN. " +
      `The body is at most ${BODY_LIMIT_BYTES} bytes, ${SESSIONS_BODY_LIMIT_BYTES} when it deposits sessions.`,
    body: json(checkinBodySchema, 'the node and its shard counts; `sessions` deposits resumable sessions for a planned move', SESSIONS_BODY_LIMIT_BYTES),
    answer: { status: 200, schema: answers.checkinAnswerSchema, description: 'the node\'s range and the signed plan' },
    errors: [...JSON_BODY, 'identity_mismatch', 'identity_conflict', ...STATE],
  },
  'POST /v1/identify': {
    operationId: 'claimIdentify',
    summary: 'Claim an Identify (or resume) for one shard',
    description:
      'Granted when the node owns the shard, its previous owner has let go and its bucket (shard_id % max_concurrency) had no grant within the Identify interval; ' +
      'otherwise the answer says how long to wait. Served only to the certificate of the node\'s last accepted check-in.',
    body: json(identifyBodySchema, 'the claim'),
    answer: { status: 200, schema: answers.identifyAnswerSchema, description: 'a grant, or the wait (granted false)' },
    errors: [...JSON_BODY, 'identity_mismatch', 'not_owner', 'identity_conflict', ...STATE],
  },
  'GET /v1/route/:guild_id': {
    operationId: 'routeGuild',
    summary: 'Which shard and node serve a guild',
    description: 'shard_id = (guild_id >> 22) % total_shards, computed exactly; the guild ID is echoed as given.',
    params: guildParamsSchema,
    answer: { status: 200, schema: answers.routeAnswerSchema, description: 'the shard and its node (null while unassigned)' },
    errors: ['invalid_request', 'uri_too_long', ...STATE],
  },
  'GET /v1/keys': {
    operationId: 'planKeys',
    summary: 'The public plan keys (JWKS)',
    description: 'The keys plans are signed with: the current one and, during a rotation, the previous one. Nodes pin them out of band (their bundle); this is for checking.',
    answer: { status: 200, schema: answers.jwksAnswerSchema, description: 'the JWKS' },
    errors: [],
  },
  'GET /v1/plan': {
    operationId: 'readPlan',
    summary: 'The operator view: plan, nodes, Identify budget, reshard',
    description: 'Only the leader answers; nodes are listed in byte order of their IDs.',
    answer: { status: 200, schema: answers.planAnswerSchema, description: 'the plan and every known node' },
    errors: [...STATE],
  },
  'POST /v1/nodes/:node_id/drain': {
    operationId: 'setDraining',
    summary: "Set or clear a node's draining flag",
    description:
      'The flag is kept while the node is not live and across restarts; the plan is recomputed and the change audited with the operator\'s name. ' +
      'A drain that would leave shards without a node is refused (409 insufficient_capacity) unless the body says "force": true.',
    params: nodeParamsSchema,
    body: json(drainBodySchema, 'the flag, and force to drain even when shards would be left without a node'),
    answer: { status: 200, schema: answers.drainAnswerSchema, description: 'the flag and the plan after the change' },
    errors: [...JSON_BODY, 'uri_too_long', 'insufficient_capacity', ...STATE],
  },
  'POST /v1/crl': {
    operationId: 'pushCrl',
    summary: 'Install a CRL live',
    description:
      'The CRL must be signed by the CA, its number never lower than the one in force, its times valid; it is kept where every replica and a restart find it, ' +
      'and audited with the operator\'s name. A refused CRL answers 400 with the reason and the one in force stays.',
    body: { mediaTypes: CRL_MEDIA_TYPES, schema: null, limitBytes: CRL_BODY_LIMIT_BYTES, description: 'the CRL as PEM text (an "X509 CRL" block)' },
    answer: { status: 200, schema: answers.crlPushAnswerSchema, description: 'the CRL in force after the push' },
    errors: ['invalid_request', 'payload_too_large', 'unsupported_media_type', ...STATE],
  },
  'POST /v1/reshard': {
    operationId: 'startReshard',
    summary: 'Start a live reshard to a new shard count',
    description:
      'The next set is planned beside the current one and identified while the current set keeps serving; the switch happens once every next-set shard is reported running. ' +
      'Refused while another reshard runs, when the daily Identify budget left is below the new count, or while a live node\'s agent cannot run a next set.',
    body: json(reshardBodySchema, 'the new shard count'),
    answer: { status: 202, schema: answers.reshardStartedSchema, description: 'the reshard started' },
    errors: [...JSON_BODY, 'reshard_in_progress', 'budget_insufficient', 'agents_outdated', ...STATE],
  },
  'POST /v1/renew': {
    operationId: 'renewCertificate',
    summary: "Renew the node's certificate: queue a CSR for the signer",
    description:
      "The CSR names the certificate's own CN and carries a new key; only the certificate of the node's last accepted check-in may renew. " +
      'The CA host\'s signer issues a certificate of the same lifetime; poll GET /v1/renew/:request_id. The same CSR again is the same request.',
    body: json(renewBodySchema, 'the CSR (PEM)', ENROLL_BODY_LIMIT_BYTES),
    answer: { status: 202, schema: answers.enrollQueuedSchema, description: 'the request queued' },
    errors: [...JSON_BODY, 'identity_conflict', ...STATE],
  },
  'GET /v1/renew/:request_id': {
    operationId: 'renewalStatus',
    summary: 'Poll a renewal',
    description: 'Only the node that asked may read it; a request is gone (410) 1 hour after it was made if still pending, 10 minutes after its answer.',
    params: requestParamsSchema,
    answer: { status: 200, schema: answers.enrollStatusSchema, description: 'pending, issued (with the certificate) or denied (with the reason)' },
    errors: ['invalid_request', 'not_found', 'gone', 'uri_too_long', ...STATE],
  },
  'GET /v1/enroll/requests': {
    operationId: 'pendingRequests',
    summary: 'The pending enrollments and renewals (signer)',
    description:
      'Oldest first, with what the signer checks itself: token id, proof, CSR, source address, and for a renewal the presenting certificate\'s serial. ' +
      'A page holds up to `limit` (default 500); `after` continues after a request, so requests held for an operator never hide newer ones.',
    query: signerListQuerySchema,
    answer: { status: 200, schema: answers.signerRequestsSchema, description: 'up to 500 pending requests' },
    errors: [...STATE],
  },
  'POST /v1/enroll/requests/:request_id': {
    operationId: 'answerRequest',
    summary: "The signer's answer: a certificate or a denial",
    description:
      "A certificate is installed only if it was issued by the controller's CA, carries the request's public key and name, the role node, and is valid; " +
      'anything else is refused (400) and audited enroll_refused. A request answered already is a conflict (409).',
    params: requestParamsSchema,
    body: json(decisionBodySchema, '{"certificate": PEM} or {"denied": reason}', ENROLL_BODY_LIMIT_BYTES),
    answer: { status: 200, schema: answers.decisionAnswerSchema, description: 'the answer recorded' },
    errors: [...JSON_BODY, 'not_found', 'gone', 'identity_conflict', 'uri_too_long', ...STATE],
  },
  'GET /v1/enroll/queue': {
    operationId: 'enrollQueue',
    summary: 'The enrollment queue as the controller sees it (operators; no CSR, no proof)',
    description: 'Pending enrollments and renewals, oldest first: kind, name, token id, source address, age.',
    answer: { status: 200, schema: answers.enrollQueueSchema, description: 'the pending requests' },
    errors: [...STATE],
  },
  'DELETE /v1/reshard': {
    operationId: 'abortReshard',
    summary: 'Abort the live reshard',
    description: 'The next set is dropped and the deployment stays at its current shard count.',
    answer: { status: 200, schema: answers.reshardAbortedSchema, description: 'the reshard aborted' },
    errors: ['not_found', ...STATE],
  },
}
