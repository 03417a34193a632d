/** zod schemas of the node request bodies (SPEC "Check-in", "Identify claims") and the drain body. */
import { z } from 'zod'
import { nameSchema } from './names.js'

// z.number() refuses strings (no coercion); .int() refuses fractions and unsafe integers.
const count = z.number().int().min(0).max(128)

/** `POST /v1/checkin` body: exactly these fields. */
export const checkinBodySchema = z
  .object({
    node_id: nameSchema,
    capacity: z.number().int().min(1).max(128),
    ready_shards: count,
    starting_shards: count,
    backoff_shards: count,
    fatal_shards: count,
    generation: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  })
  .strict()

/** `POST /v1/identify` body; the bound total_shards - 1 is checked by the controller. */
export const identifyBodySchema = z
  .object({
    node_id: nameSchema,
    shard_id: z.number().int().min(0).max(65535),
  })
  .strict()

/** `POST /v1/nodes/:node_id/drain` body. */
export const drainBodySchema = z.object({ draining: z.boolean() }).strict()

/** A validated check-in body. */
export type CheckinBody = z.infer<typeof checkinBodySchema>
/** A validated Identify claim body. */
export type IdentifyBody = z.infer<typeof identifyBodySchema>
