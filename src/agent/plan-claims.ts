/**
 * The payload of a signed plan (SPEC "Signed plans") and the rules that tie its fields together. The
 * same schema checks the fields a check-in answer carries in plain.
 */
import { z } from 'zod'

const int = (min: number, max: number) => z.number().int().min(min).max(max)

/** Date.prototype.toISOString()'s form: the only one a controller writes `until` in. */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?Z$/

/** `rest` of a plan and of a check-in answer: requests per second, invalid responses per 10 minutes, until when. */
export const restShareClaimSchema = z
  .object({
    per_second: z.number().min(0).max(100_000),
    invalid_budget: int(0, 10_000_000),
    until: z.string().regex(ISO_INSTANT, 'must be an ISO 8601 instant').refine((v) => Number.isFinite(Date.parse(v)), 'must be a valid instant'),
  })
  .strict()

/** Exactly the claims the controller signs; unknown claims make the payload malformed. */
export const planClaimsSchema = z
  .object({
    iss: z.string().min(1).max(256),
    sub: z.string().min(1).max(256),
    iat: int(0, Number.MAX_SAFE_INTEGER),
    exp: int(0, Number.MAX_SAFE_INTEGER),
    generation: int(0, Number.MAX_SAFE_INTEGER),
    total_shards: int(1, 65536),
    range_start: int(0, 65536),
    range_count: int(0, 65536),
    assigned: z.array(int(0, 65535)).max(65536),
    lease_seconds: int(1, 86_400),
    max_concurrency: int(1, 65536),
    // a live reshard's next set (SPEC "Live resharding"), run beside the current one until the switch
    next: z
      .object({ total_shards: int(1, 65536), range_start: int(0, 65536), range_count: int(0, 65536), assigned: z.array(int(0, 65535)).max(65536) })
      .strict()
      .optional(),
    // the node's REST share (SPEC "REST budget"), only from a controller with "rest" configured
    rest: restShareClaimSchema.optional(),
  })
  .strict()

/** A plan's claims, as signed (snake_case, like the wire format and the test vectors). */
export type PlanClaims = z.infer<typeof planClaimsSchema>

/** Why the claims disagree with each other, or null when they are consistent. */
export function claimsInconsistency(c: PlanClaims): string | null {
  if (c.exp !== c.iat + c.lease_seconds) return 'exp is not iat + lease_seconds'
  if (c.range_start + c.range_count > c.total_shards) return 'the range ends past total_shards'
  if (c.assigned.length !== c.range_count) return 'assigned does not hold range_count shards'
  for (let i = 0; i < c.assigned.length; i++) {
    if (c.assigned[i] !== c.range_start + i) return 'assigned is not the range [range_start, range_start + range_count)'
  }
  if (c.max_concurrency > 1 && c.total_shards % c.max_concurrency !== 0) return 'total_shards is not a multiple of max_concurrency'
  const next = c.next
  if (next !== undefined) {
    if (next.total_shards === c.total_shards) return 'next.total_shards is the current total_shards'
    if (next.range_start + next.range_count > next.total_shards) return 'the next range ends past next.total_shards'
    if (next.assigned.length !== next.range_count) return 'next.assigned does not hold next.range_count shards'
    for (let i = 0; i < next.assigned.length; i++) {
      if (next.assigned[i] !== next.range_start + i) return 'next.assigned is not the next range'
    }
    if (c.max_concurrency > 1 && next.total_shards % c.max_concurrency !== 0) return 'next.total_shards is not a multiple of max_concurrency'
  }
  return null
}

/** The plain fields of a check-in answer that repeat the signed claims. */
export const PLAIN_PLAN_FIELDS = ['generation', 'total_shards', 'assigned', 'range_start', 'range_count', 'lease_seconds', 'max_concurrency', 'next', 'rest'] as const

/** Subset of the check-in answer that must equal the signed claims. */
export type PlainPlanFields = Pick<PlanClaims, (typeof PLAIN_PLAN_FIELDS)[number]>

/** The first plain field that differs from the signed claims, or null when all agree. */
export function plainFieldMismatch(plain: PlainPlanFields, claims: PlanClaims): string | null {
  for (const field of PLAIN_PLAN_FIELDS) {
    const a = plain[field]
    const b = claims[field]
    const same =
      field === 'rest'
        ? sameRest(plain.rest, claims.rest)
        : Array.isArray(a) && Array.isArray(b)
          ? a.length === b.length && a.every((v, i) => v === b[i])
          : typeof a === 'object' || typeof b === 'object'
            ? JSON.stringify(a) === JSON.stringify(b) // `next`: the same four fields, in the controller's order
            : a === b
    if (!same) return field
  }
  return null
}

/** Two `rest` values agree field by field (their key order is not the node's concern). */
function sameRest(a: PlanClaims['rest'], b: PlanClaims['rest']): boolean {
  if (a === undefined || b === undefined) return a === b
  return a.per_second === b.per_second && a.invalid_budget === b.invalid_budget && a.until === b.until
}
