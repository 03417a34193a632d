/**
 * The node's REST share from its verified plan (SPEC "REST budget"). The share ends at the plan's
 * `until`, but never after this node's own lease (the check-in's send time plus lease_seconds): the
 * controller's lease starts when it received the check-in, later, so the node's end is the earlier one
 * whatever the two wall clocks say. A plan without `rest` (a controller without "rest" configured)
 * gives no share: the proxy sends nothing.
 */
import type { Logger } from 'pino'
import type { RestDemandBody } from '../core/schemas.js'
import type { RestDemand, RestShareGrant } from '../rest/index.js'
import type { AgentClock } from './clock.js'
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


/** The check-in's `rest_demand` from the proxy's counts over `windowMs` and the share held at `now`. */
export function restDemandBody(proxy: RestProxyLink, windowMs: number, share: HeldRestShare | null, now: number): RestDemandBody {
  const demand = proxy.demand(windowMs)
  const held = share !== null && now < share.untilMs ? { held: { per_second: share.perSecond, invalid_budget: share.invalidBudget } } : {}
  return { per_second: demand.perSecond, invalid_10m: demand.invalid10m, ...held }
}

/** One agent's side of its REST proxy: the share of each accepted plan in, the demand of each check-in out. */
export class RestShareFeed {
  /** The share in force, or null. */
  private share: HeldRestShare | null = null
  /** Whether the last plan came without `rest` (said once per change, not per check-in). */
  private restless: boolean | null = null
  /** When the previous check-in was sent: the demand's window ends at the next one. */
  private previousCheckinAt: number | null = null

  constructor(private readonly proxy: RestProxyLink, private readonly clock: AgentClock, private readonly logger: Logger) {}

  /** Gives the proxy the share of a plan just accepted from a check-in sent at `sentAt` (none without `rest`, or without authority). */
  apply(plan: PlanClaims, sentAt: number, hasAuthority: boolean): void {
    if (plan.rest === undefined && this.restless !== true) {
      this.logger.warn("the controller's plans give no REST share (its configuration has no \"rest\"): the REST proxy sends nothing")
    }
    this.restless = plan.rest === undefined
    const now = this.clock.now()
    this.share = hasAuthority ? shareFromPlan(plan, sentAt, now, this.clock.wallNow()) : null
    this.proxy.setShare(this.share === null ? null : grantOf(this.share, now))
  }

  /** No share from now on (authority lost, leaving, halted): the proxy sends nothing. */
  drop(): void {
    this.share = null
    this.proxy.setShare(null)
  }

  /** The check-in's `rest_demand`: what the bot wanted since the previous check-in (the first: since the proxy started). */
  demand(): RestDemandBody {
    const now = this.clock.now()
    const windowMs = this.previousCheckinAt === null ? Number.POSITIVE_INFINITY : now - this.previousCheckinAt
    this.previousCheckinAt = now
    return restDemandBody(this.proxy, windowMs, this.share, now)
  }
}
