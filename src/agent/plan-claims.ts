/**
 * The payload of a signed plan (SPEC "Signed plans") and the rules that tie its fields together. The
 * same schema checks the fields a check-in answer carries in plain.
 */
import { z } from 'zod'

const int = (min: number, max: number) => z.number().int().min(min).max(max)

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
  return null
}

/** The plain fields of a check-in answer that repeat the signed claims. */
export const PLAIN_PLAN_FIELDS = ['generation', 'total_shards', 'assigned', 'range_start', 'range_count', 'lease_seconds', 'max_concurrency'] as const

/** Subset of the check-in answer that must equal the signed claims. */
export type PlainPlanFields = Pick<PlanClaims, (typeof PLAIN_PLAN_FIELDS)[number]>

/** The first plain field that differs from the signed claims, or null when all agree. */
export function plainFieldMismatch(plain: PlainPlanFields, claims: PlanClaims): string | null {
  for (const field of PLAIN_PLAN_FIELDS) {
    const a = plain[field]
    const b = claims[field]
    const same = Array.isArray(a) && Array.isArray(b) ? a.length === b.length && a.every((v, i) => v === b[i]) : a === b
    if (!same) return field
  }
  return null
}
