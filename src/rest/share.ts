/**
 * The node's REST share as the proxy applies it (SPEC "REST budget"): requests per second it may send
 * to Discord and invalid responses it may meet in any 10 minutes, until a moment on the proxy's clock.
 */

/** A share given to the proxy: `validForMs` from the moment it is given (so the giver's clock need not be the proxy's). */
export interface RestShareGrant {
  readonly perSecond: number
  readonly invalidBudget: number
  readonly validForMs: number
}

/** A share on the proxy's clock. */
export interface RestShare {
  readonly perSecond: number
  readonly invalidBudget: number
  /** Monotonic ms on the proxy's clock; from then on the share is 0. */
  readonly untilMs: number
}

/** The share in force at `now`, or null: none given, or it ran out. */
export function shareInForce(share: RestShare | null, now: number): RestShare | null {
  return share !== null && now < share.untilMs ? share : null
}

/** Throws a RangeError for a grant that is not finite and non-negative (the signed plan was checked; this guards the library API). */
export function assertValidGrant(grant: RestShareGrant): void {
  const ok = (n: number) => typeof n === 'number' && Number.isFinite(n) && n >= 0
  if (!ok(grant.perSecond) || !ok(grant.validForMs) || !ok(grant.invalidBudget) || !Number.isInteger(grant.invalidBudget)) {
    throw new RangeError('a REST share needs perSecond and validForMs finite and >= 0, invalidBudget a whole number >= 0')
  }
}
