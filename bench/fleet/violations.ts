/** What a fleet run can find wrong, by kind; each kind is counted in the summary and any one fails the run. */

/** Every kind of violation, in the order the summary lists them. */
export const VIOLATION_KINDS = [
  'overlap',
  'guild_overlap',
  'late_stop_after_wake',
  'revoked_kept_running',
  'revoked_started',
  'grant_spacing',
  'unaudited_grant',
  'daily_budget',
  'rate_limited',
  'plan_refused',
  'restart_moved',
  'not_converged',
  'process_failed',
] as const

/** One kind of violation. */
export type ViolationKind = (typeof VIOLATION_KINDS)[number]

/** One violation with a sentence that says where. */
export interface Violation {
  readonly kind: ViolationKind
  readonly detail: string
}

/** Counts per kind (every kind present, zeros included). */
export function countByKind(violations: readonly Violation[]): Record<ViolationKind, number> {
  const counts = Object.fromEntries(VIOLATION_KINDS.map((k) => [k, 0])) as Record<ViolationKind, number>
  for (const v of violations) counts[v.kind] += 1
  return counts
}
