/**
 * Readiness (SPEC "Operations endpoint"): the controller can serve nodes correctly when every check
 * holds. Each check names a stable reason; /readyz lists the reasons of the checks that fail.
 */

/** Every reason /readyz can give, in the order they are listed. */
export const NOT_READY_REASONS = [
  'state_not_durable', // the last state write failed and no retry has succeeded yet
  'crl_past_next_update', // the CRL in force is past nextUpdate: OpenSSL refuses every client
  'mtls_listener_down', // the mTLS listener is not listening (not yet, or no longer)
  'stopping', // a graceful stop is under way
  'not_leader', // HA: another replica leads (added by the HA wiring)
] as const

/** Why the controller is not ready. */
export type NotReadyReason = (typeof NOT_READY_REASONS)[number]

/** One readiness condition: null while it holds, else the reason it does not. */
export type ReadinessCheck = () => NotReadyReason | null

/** The outcome of every check at one moment. */
export interface Readiness {
  readonly ready: boolean
  readonly reasons: readonly NotReadyReason[]
}

/** Runs every check; reasons come out once each, in NOT_READY_REASONS order. */
export function evaluateReadiness(checks: readonly ReadinessCheck[]): Readiness {
  const failing = new Set<NotReadyReason>()
  for (const check of checks) {
    const reason = check()
    if (reason !== null) failing.add(reason)
  }
  const reasons = NOT_READY_REASONS.filter((r) => failing.has(r))
  return { ready: reasons.length === 0, reasons }
}
