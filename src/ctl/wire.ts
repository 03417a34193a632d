/**
 * The controller's answers as pxe-ctl reads them (SPEC "Operator endpoints", "Operator view"). Objects
 * let unknown keys through, since controllers gain fields; the fields an older controller lacks
 * (leader, planner, identify, pending_handoffs, reshard, drain_flags_not_live; a drain answer's live and
 * unassigned) are optional.
 */
import { z } from 'zod'

const count = z.number().int().min(0)
const generation = z.number().int().min(0)

export const planNodeSchema = z.object({
  node_id: z.string(),
  capacity: count,
  draining: z.boolean(),
  range_start: count,
  range_count: count,
  last_seen: z.string(),
  generation: generation.nullable(),
  ready_shards: count,
  starting_shards: count,
  backoff_shards: count,
  fatal_shards: count,
  pending_handoffs: count.optional(),
  /** When the node's certificate expires (missing from an older controller's answer). */
  cert_not_after: z.string().nullable().optional(),
})

export const identifySchema = z.object({
  daily_limit: count.nullable(),
  used_24h: count.nullable(),
  remaining: count.nullable(),
  next_release_at: z.string().nullable(),
})

/** A reshard in progress: the restart barrier, or a live reshard ("identifying"); only `phase` is sure to be there. */
export const reshardStateSchema = z.looseObject({
  phase: z.string(),
  from_total_shards: count.optional(),
  total_shards: count.optional(),
  generation: generation.optional(),
  waiting_nodes: count.optional(),
  ready_shards: count.optional(),
  unassigned: count.optional(),
  pending_handoffs: count.optional(),
})

export const planSchema = z.object({
  generation,
  total_shards: z.number().int().min(1),
  max_concurrency: z.number().int().min(1),
  lease_seconds: z.number().min(0),
  unassigned: count,
  leader: z.string().optional(),
  planner: z.string().optional(),
  identify: identifySchema.optional(),
  pending_handoffs: count.optional(),
  reshard: reshardStateSchema.nullable().optional(),
  drain_flags_not_live: z.array(z.string()).optional(),
  /** Nodes that left on purpose within the last hour (missing from an older controller's answer). */
  recent_leaves: z.array(z.object({ node_id: z.string(), left_at: z.string() })).optional(),
  /** The REST budget (null: not configured; missing from an older controller's answer). */
  rest: z.looseObject({ budget_per_second: z.number(), allocated_per_second: z.number(), demand_per_second: z.number() }).nullable().optional(),
  nodes: z.array(planNodeSchema),
})

/** A drain's answer; `live` and `unassigned` (shards without a node after it) are missing from an older controller's. */
export const drainAnswerSchema = z.object({ node_id: z.string(), draining: z.boolean(), generation, live: z.boolean().optional(), unassigned: count.optional() })

export const routeAnswerSchema = z.object({ guild_id: z.string(), shard_id: count, node_id: z.string().nullable(), generation })

export const reshardAnswerSchema = z.looseObject({ from: count.optional(), to: count.optional(), generation: generation.optional() })

/** GET /v1/enroll/queue: the pending enrollments and renewals (no CSR, no proof). */
export const enrollQueueSchema = z.object({
  pending: count,
  held: count,
  requests: z.array(
    z.looseObject({
      request_id: z.string(),
      kind: z.string(),
      name: z.string(),
      token_id: z.string().nullable(),
      source: z.string(),
      created_at: z.string(),
      age_ms: count,
    }),
  ),
})
export type EnrollQueue = z.infer<typeof enrollQueueSchema>

export type Plan = z.infer<typeof planSchema>
export type PlanNode = z.infer<typeof planNodeSchema>
export type ReshardState = z.infer<typeof reshardStateSchema>
export type DrainAnswer = z.infer<typeof drainAnswerSchema>
export type RouteAnswer = z.infer<typeof routeAnswerSchema>
