/**
 * The node's REST share from its verified plan (SPEC "REST budget"). The share ends at the plan's
 * `until`, but never after this node's own lease (the check-in's send time plus lease_seconds): the
 * controller's lease starts when it received the check-in, later, so the node's end is the earlier one
 * whatever the two wall clocks say. A plan without `rest` (a controller without "rest" configured)
 * gives no share: the proxy sends nothing.
 */
import type { RestDemand, RestShareGrant } from '../rest/index.js'
import type { PlanClaims } from './plan-claims.js'

/** What the agent needs of a REST proxy: it gives the share, reads the demand, and registers the metrics. */
export interface RestProxyLink {
  setShare(grant: RestShareGrant | null): void
  demand(windowMs: number): RestDemand
  registerMetrics(registry: import('prom-client').Registry): void
}

/** The share a node holds, on its monotonic clock. */
export interface HeldRestShare {
  readonly perSecond: number
  readonly invalidBudget: number
  readonly untilMs: number
}

/**
 * The share a verified plan gives, or null (no `rest`, or already ended). `sentAt` and `now` are on the
 * monotonic clock, `wallNow` on the wall clock.
 */
export function shareFromPlan(plan: PlanClaims, sentAt: number, now: number, wallNow: number): HeldRestShare | null {
  const rest = plan.rest
  if (rest === undefined) return null
  const untilMs = Math.min(sentAt + plan.lease_seconds * 1000, now + (Date.parse(rest.until) - wallNow))
  if (!(untilMs > now)) return null
  return { perSecond: rest.per_second, invalidBudget: rest.invalid_budget, untilMs }
}

/** The grant for the proxy (valid for the time left). */
export function grantOf(share: HeldRestShare, now: number): RestShareGrant {
  return { perSecond: share.perSecond, invalidBudget: share.invalidBudget, validForMs: Math.max(0, share.untilMs - now) }
}

/** `rest_demand` of a check-in (SPEC "REST budget"): `held` only while a share is in force. */
export interface RestDemandBody {
  readonly per_second: number
  readonly invalid_10m: number
  readonly held?: { readonly per_second: number; readonly invalid_budget: number }
}

/** The check-in's `rest_demand` from the proxy's counts over `windowMs` and the share held at `now`. */
export function restDemandBody(proxy: RestProxyLink, windowMs: number, share: HeldRestShare | null, now: number): RestDemandBody {
  const demand = proxy.demand(windowMs)
  const held = share !== null && now < share.untilMs ? { held: { per_second: share.perSecond, invalid_budget: share.invalidBudget } } : {}
  return { per_second: demand.perSecond, invalid_10m: demand.invalid10m, ...held }
}
