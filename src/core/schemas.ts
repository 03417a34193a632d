/** zod schemas of the node request bodies (SPEC "Check-in", "Identify claims") and the drain body. */
import { z } from 'zod'
import { nameSchema } from './names.js'

// z.number() refuses strings (no coercion); .int() refuses fractions and unsafe integers.
const count = z.number().int().min(0).max(128)

/** Most sessions one check-in may deposit (SPEC "Session handoff"). */
export const MAX_DEPOSITED_SESSIONS = 128

/**
 * One deposited session. Its values are never echoed: the messages name the rule, not the input. The
 * shard's range and the resume URL's host are checked by the controller (they depend on its settings).
 */
const sessionEntrySchema = z
  .object({
    shard_id: z.number().int().min(0).max(65535),
    session_id: z.string().regex(/^[A-Za-z0-9]{1,128}$/, 'must be 1 to 128 letters and digits'),
    sequence: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    resume_url: z.string().max(256, 'must be at most 256 characters'),
  })
  .strict()

/** Largest REST rate a node may report or claim to hold (requests per second): far above any bot's global limit. */
export const MAX_REST_PER_SECOND = 100_000
/** Largest invalid-request count a node may report (Discord bans an address at 10,000 in 10 minutes). */
export const MAX_REST_INVALID = 10_000_000

// A rate may be fractional (5 requests in a 10 s interval is 0.5/s); counts are whole.
const restRate = z.number().min(0).max(MAX_REST_PER_SECOND)
const restCount = z.number().int().min(0).max(MAX_REST_INVALID)

/** `rest_demand` (SPEC "REST budget"): what the node's REST clients wanted, and the share it holds now. */
const restDemandSchema = z
  .object({
    per_second: restRate,
    invalid_10m: restCount,
    // the share of its last verified plan, while in force: lets a restarted controller count it
    held: z.object({ per_second: restRate, invalid_budget: restCount }).strict().optional(),
  })
  .strict()

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
    sessions: z.array(sessionEntrySchema).max(MAX_DEPOSITED_SESSIONS, `must hold at most ${MAX_DEPOSITED_SESSIONS} entries`).optional(),
    // next-set shards running during a live reshard
    next_ready_shards: count.optional(),
    // the node is shutting down on purpose (SPEC "Leaving on purpose"): it stopped every shard
    leaving: z.literal(true, 'must be true (or absent)').optional(),
    rest_demand: restDemandSchema.optional(),
  })
  .strict()

/** `POST /v1/identify` body; the bound total_shards - 1 is checked by the controller. */
export const identifyBodySchema = z
  .object({
    node_id: nameSchema,
    shard_id: z.number().int().min(0).max(65535),
    // the node's RESUME was refused: discard a held session, claim an ordinary Identify
    fresh: z.boolean().optional(),
    // a live reshard's next set, or the current one (the default)
    set: z.enum(['current', 'next']).optional(),
  })
  .strict()

/** `POST /v1/reshard` body; the shard-count rules are checked by the controller (they depend on its settings). */
export const reshardBodySchema = z.object({ total_shards: z.number().int().min(1).max(65536) }).strict()

/** `POST /v1/nodes/:node_id/drain` body. */
/** `force`: drain even when the other live nodes cannot take every shard (SPEC "Operator endpoints"). */
export const drainBodySchema = z.object({ draining: z.boolean(), force: z.literal(true).optional() }).strict()

/** A validated `rest_demand`. */
export type RestDemandBody = z.infer<typeof restDemandSchema>
/** A validated check-in body. */
export type CheckinBody = z.infer<typeof checkinBodySchema>
/** One validated deposited session. */
export type SessionEntry = z.infer<typeof sessionEntrySchema>
/** A validated Identify claim body. */
export type IdentifyBody = z.infer<typeof identifyBodySchema>
