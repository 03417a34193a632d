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
  'reshard_not_switched',
  'coverage_gap',
  'process_failed',
  // --gateway discordjs: the gateway emulator's findings (gateway-run.ts)
  'gateway_bucket',
  'gateway_overlap',
  'gateway_session_limit',
  'events_lost',
  'events_duplicated',
] as const

/** The kinds only a run with --gateway discordjs can find (the summary table lists them only then). */
export const GATEWAY_VIOLATION_KINDS: ReadonlySet<string> = new Set(['gateway_bucket', 'gateway_overlap', 'gateway_session_limit', 'events_lost', 'events_duplicated'])

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
