/**
 * zod schemas of what the controller answers, exactly (strict objects): the served bodies of every route
 * and the one error shape. The server builds its answers by hand (render.ts, checkin-answer.ts) for speed;
 * these schemas describe them for the API reference (openapi.ts), and test/http/openapi.test.ts parses real
 * answers with them, so that an answer and its documentation cannot drift apart unnoticed.
 */
import { z } from 'zod'
import { ERROR_STATUS, type ErrorCode } from '../errors.js'
import { PLANNER_NAMES } from '../core/planners.js'

const int = (min: number, max: number) => z.number().int().min(min).max(max)
const generation = int(0, Number.MAX_SAFE_INTEGER).meta({ description: 'plan generation; never decreases for the life of the deployment' })
const shardCount = int(1, 65536)
const shardId = int(0, 65535)
const rangeBound = int(0, 65536)
const count = int(0, 65536)
const isoTime = z.string().meta({ format: 'date-time' })

/** The shards of a range, in order: `[range_start, ..., range_start + range_count - 1]`. */
const assigned = z.array(shardId).max(128).meta({ description: 'the shards of the range, in order' })

/** `POST /v1/checkin` 200 (SPEC "Check-in"); `next` only while a live reshard runs. */
export const checkinAnswerSchema = z
  .object({
    generation,
    total_shards: shardCount,
    assigned,
    range_start: rangeBound,
    range_count: int(0, 128),
    lease_seconds: int(1, 86_400),
    max_concurrency: shardCount,
    next: z
      .object({ total_shards: shardCount, range_start: rangeBound, range_count: int(0, 128), assigned })
      .strict()
      .optional()
      .meta({ description: "this node's range of a live reshard's next set (absent without one)" }),
    rest: z
      .object({
        per_second: z.number().min(0).meta({ description: 'requests per second this node may send to Discord (at most 2 decimals; 0: hold every request)' }),
        invalid_budget: int(0, Number.MAX_SAFE_INTEGER).meta({ description: 'invalid responses (401, 403, 429) this node may meet in any 10 minutes before it stops sending' }),
        until: isoTime.meta({ description: "the end of this answer's lease: without a newer plan, the share is 0 from then on" }),
      })
      .strict()
      .optional()
      .meta({ description: 'this node\'s share of the bot\'s REST budget (SPEC "REST budget"); present when the controller has a `rest` configuration and the check-in carried `rest_demand`' }),
    plan_jws: z.string().min(1).meta({ description: 'compact JWS (EdDSA, typ pxe-plan+jwt) over the same values; verify it under a key of GET /v1/keys pinned out of band' }),
  })
  .strict()

const grantFields = { granted: z.literal(true), shard_id: shardId, bucket: shardId, generation }

/** `POST /v1/identify` 200: a grant (an Identify, a resume handing the deposited session over, a next-set shard) or the wait. */
export const identifyAnswerSchema = z.union([
  z.object({ ...grantFields, mode: z.literal('identify') }).strict(),
  z
    .object({
      ...grantFields,
      mode: z.literal('resume'),
      session: z.object({ session_id: z.string(), sequence: int(0, Number.MAX_SAFE_INTEGER), resume_url: z.string() }).strict(),
    })
    .strict(),
  z.object({ ...grantFields, mode: z.literal('identify'), set: z.literal('next') }).strict(),
  z
    .object({
      granted: z.literal(false),
      retry_after_ms: int(0, Number.MAX_SAFE_INTEGER),
      reason: z.enum(['bucket_busy', 'handoff_pending', 'daily_limit']),
    })
    .strict(),
])

/** `GET /v1/route/:guild_id` 200; `node_id` is null while the shard has no node. */
export const routeAnswerSchema = z
  .object({ guild_id: z.string(), shard_id: shardId, node_id: z.string().nullable(), generation })
  .strict()

/** `GET /v1/keys` 200: the public plan keys, the current one first (two during a rotation). */
export const jwksAnswerSchema = z
  .object({
    keys: z
      .array(
        z
          .object({
            kty: z.literal('OKP'),
            crv: z.literal('Ed25519'),
            x: z.string().regex(/^[A-Za-z0-9_-]{43}$/),
            kid: z.string().meta({ description: 'RFC 7638 thumbprint (SHA-256) of the key' }),
            alg: z.literal('EdDSA'),
            use: z.literal('sig'),
          })
          .strict(),
      )
      .min(1),
  })
  .strict()

const planNodeSchema = z
  .object({
    node_id: z.string(),
    capacity: int(1, 128),
    draining: z.boolean(),
    range_start: rangeBound,
    range_count: int(0, 128),
    last_seen: isoTime,
    generation: generation.nullable().meta({ description: 'the generation the node last reported running, or null' }),
    ready_shards: int(0, 128),
    starting_shards: int(0, 128),
    backoff_shards: int(0, 128),
    fatal_shards: int(0, 128),
    pending_handoffs: count,
    cert_not_after: isoTime.nullable().meta({ description: "when the certificate of the node's last check-in expires; null until its first check-in after a controller restart" }),
    next: z.object({ range_start: rangeBound, range_count: int(0, 128), ready_shards: int(0, 128) }).strict().nullable(),
    rest: z
      .object({
        per_second: z.number().min(0),
        invalid_budget: int(0, Number.MAX_SAFE_INTEGER),
        demand: z.object({ per_second: z.number().min(0), invalid_10m: int(0, Number.MAX_SAFE_INTEGER) }).strict(),
      })
      .strict()
      .nullable()
      .meta({ description: "the node's REST share in force (0 when none) and the demand it last reported; null when it reports no demand (it runs no REST proxy) or without a REST budget" }),
  })
  .strict()

const reshardStateSchema = z.union([
  z.object({ phase: z.literal('restart_barrier'), total_shards: shardCount, generation, waiting_nodes: count }).strict(),
  z
    .object({
      phase: z.literal('identifying'),
      from_total_shards: shardCount,
      total_shards: shardCount,
      generation,
      ready_shards: count,
      unassigned: count,
      pending_handoffs: count,
    })
    .strict(),
])

/** `GET /v1/plan` 200 (SPEC "Operator endpoints", "Operator view"): nodes in byte order of their IDs. */
export const planAnswerSchema = z
  .object({
    generation,
    total_shards: shardCount,
    max_concurrency: shardCount,
    lease_seconds: int(1, 86_400),
    unassigned: count,
    planner: z.enum(PLANNER_NAMES as [string, ...string[]]),
    identify: z
      .object({ daily_limit: count.nullable(), used_24h: count.nullable(), remaining: count.nullable(), next_release_at: isoTime.nullable() })
      .strict()
      .meta({ description: 'the daily Identify budget; nulls without daily_identify_limit' }),
    pending_handoffs: count,
    reshard: reshardStateSchema.nullable(),
    drain_flags_not_live: z.array(z.string()),
    recent_leaves: z
      .array(z.object({ node_id: z.string(), left_at: isoTime }).strict())
      .meta({ description: 'nodes that left on purpose ("leaving": true) within the last hour, newest first; a restart of the controller forgets them' }),
    rest: z
      .object({
        global_per_second: z.number(),
        safety: z.number(),
        budget_per_second: z.number().meta({ description: 'global_per_second × safety: what the shares may add up to' }),
        invalid_budget: int(0, Number.MAX_SAFE_INTEGER).meta({ description: 'invalid_per_10_minutes × safety' }),
        allocated_per_second: z.number().meta({ description: 'the sum of the shares in force (never above budget_per_second)' }),
        allocated_invalid: int(0, Number.MAX_SAFE_INTEGER),
        demand_per_second: z.number().meta({ description: 'the sum of the live nodes\' last reported demands' }),
      })
      .strict()
      .nullable()
      .meta({ description: 'the REST budget (SPEC "REST budget"); null when the configuration has none' }),
    nodes: z.array(planNodeSchema),
    leader: z.string().meta({ description: 'controller ID of the replica that answered (only the leader answers)' }),
  })
  .strict()

/** `POST /v1/nodes/:node_id/drain` 200. */
export const drainAnswerSchema = z
  .object({
    node_id: z.string(),
    draining: z.boolean(),
    generation,
    live: z.boolean().meta({ description: 'whether the node is live now (the flag is kept for a node that is not)' }),
    unassigned: count.meta({ description: 'shards without a node after the change' }),
  })
  .strict()

/** `POST /v1/reshard` 202: the live reshard started. */
export const reshardStartedSchema = z.object({ from: shardCount, to: shardCount, generation }).strict()

/** `DELETE /v1/reshard` 200: the live reshard aborted; the deployment stays at `from` shards. */
export const reshardAbortedSchema = z.object({ from: shardCount, to: shardCount, generation, aborted: z.literal(true) }).strict()

/** `POST /v1/crl` 200: the CRL in force after the push; `changed` is false when it was in force already. */
export const crlPushAnswerSchema = z
  .object({
    crl_number: z.string().regex(/^[0-9]+$/).nullable(),
    this_update: isoTime,
    next_update: isoTime.nullable(),
    revoked: int(0, Number.MAX_SAFE_INTEGER),
    changed: z.boolean(),
  })
  .strict()

/** `POST /v1/enroll` and `POST /v1/renew` 202: the request queued (or the one this CSR made earlier). */
export const enrollQueuedSchema = z
  .object({
    request_id: z.string().regex(/^[A-Za-z0-9_-]{22}$/).meta({ description: '128 random bits, base64url: poll with it' }),
    poll_after_ms: int(0, 3_600_000).meta({ description: 'how long to wait before the first poll, and between polls' }),
  })
  .strict()

/** `GET /v1/enroll/:request_id` and `GET /v1/renew/:request_id` 200. */
export const enrollStatusSchema = z
  .object({
    status: z.enum(['pending', 'issued', 'denied']),
    certificate: z.string().optional().meta({ description: 'issued: the node certificate (PEM)' }),
    ca: z.string().optional().meta({ description: "issued: the controller's CA certificate (PEM), which the node then trusts" }),
    plan_jwks: z.unknown().optional().meta({ description: 'issued: the public plan keys (JWKS) the node pins' }),
    reason: z.string().optional().meta({ description: "denied: the signer's reason" }),
  })
  .strict()

/** One pending request as the signer pulls it (`GET /v1/enroll/requests`): what it needs to check it itself. */
const signerRequest = z
  .object({
    request_id: z.string(),
    kind: z.enum(['enroll', 'renew']),
    name: z.string(),
    csr: z.string(),
    token_id: z.string().nullable(),
    proof: z.string().nullable().meta({ description: "enroll: HMAC-SHA256 under the token's secret over the CSR's DER (null when a restart could not open its seal)" }),
    source: z.string(),
    presenting_serial: z.string().nullable().meta({ description: 'renew: the serial of the certificate that asked' }),
    created_at: isoTime,
  })
  .strict()
export const signerRequestsSchema = z.object({ requests: z.array(signerRequest) }).strict()

/** `POST /v1/enroll/requests/:request_id` 200. */
export const decisionAnswerSchema = z.object({ request_id: z.string(), status: z.enum(['issued', 'denied']) }).strict()

/** `GET /v1/enroll/queue` 200 (operators): the pending queue, no CSR, no proof. */
export const enrollQueueSchema = z
  .object({
    pending: int(0, 1_000_000),
    held: int(0, 1_000_000),
    requests: z.array(
      z
        .object({
          request_id: z.string(),
          kind: z.enum(['enroll', 'renew']),
          name: z.string(),
          token_id: z.string().nullable(),
          source: z.string(),
          presenting_serial: z.string().nullable(),
          created_at: isoTime,
          age_ms: int(0, Number.MAX_SAFE_INTEGER),
        })
        .strict(),
    ),
  })
  .strict()

/** Every error code, in the order of errors.ts. */
export const ERROR_CODES = Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]]

/** Every refusal, from any route or from the framework and Node's parser before a route runs (SPEC "Errors"). */
export const errorAnswerSchema = z
  .object({
    error: z.enum(ERROR_CODES),
    message: z.string().meta({ description: 'a sentence for a person; never echoes more than 64 characters of the request' }),
    retry_after_ms: int(0, Number.MAX_SAFE_INTEGER).optional().meta({ description: 'rate_limited, and reshard_in_progress while a retired set may still run: the wait' }),
    refused_shard_id: shardId.optional().meta({ description: 'a check-in refused for one of its sessions: that entry\'s shard' }),
    unassigned: count.optional().meta({ description: 'insufficient_capacity: shards the drain would leave without a node' }),
  })
  .strict()
