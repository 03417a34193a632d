/** zod schemas of the controller's answers to a node (SPEC "Check-in", "Identify claims", "Errors"). */
import { z } from 'zod'
import { restShareClaimSchema } from './plan-claims.js'
import { sessionWireSchema } from './session.js'

const int = (min: number, max: number) => z.number().int().min(min).max(max)

/** `POST /v1/checkin` answer 200. */
export const checkinReplySchema = z
  .object({
    generation: int(0, Number.MAX_SAFE_INTEGER),
    total_shards: int(1, 65536),
    assigned: z.array(int(0, 65535)).max(65536),
    range_start: int(0, 65536),
    range_count: int(0, 65536),
    lease_seconds: int(1, 86_400),
    max_concurrency: int(1, 65536),
    next: z
      .object({ total_shards: int(1, 65536), range_start: int(0, 65536), range_count: int(0, 65536), assigned: z.array(int(0, 65535)).max(65536) })
      .strict()
      .optional(),
    rest: restShareClaimSchema.optional(),
    plan_jws: z.string().min(1),
  })
  .strict()

const grant = { granted: z.literal(true), shard_id: int(0, 65535), bucket: int(0, 65535), generation: int(0, Number.MAX_SAFE_INTEGER), set: z.literal('next').optional() }

/**
 * `POST /v1/identify` answer 200: granted (an Identify, or a resume with the session handed over), or
 * not yet with the wait. A grant without `mode` comes from a controller older than session handoff.
 */
export const identifyReplySchema = z.union([
  z.object({ ...grant, mode: z.literal('identify').optional() }).strict(),
  z.object({ ...grant, mode: z.literal('resume'), session: sessionWireSchema }).strict(),
  z
    .object({
      granted: z.literal(false),
      retry_after_ms: int(0, Number.MAX_SAFE_INTEGER),
      reason: z.enum(['bucket_busy', 'handoff_pending', 'daily_limit']),
    })
    .strict(),
])

/** Every error answer: `{error, message}`, plus `retry_after_ms` on 429 and `refused_shard_id` on a refused deposit. */
export const errorReplySchema = z
  .object({
    error: z.string().max(64),
    message: z.string().max(2048),
    retry_after_ms: int(0, Number.MAX_SAFE_INTEGER).optional(),
    refused_shard_id: int(0, 65535).optional(),
  })
  .strict()
