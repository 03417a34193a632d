/**
 * The accepted plan and what follows from it (SPEC "Signed plans", "Node agent"): which shards should
 * run, until when this node holds authority over them, which shards to stop and which to claim, and
 * which generation the node may report as applied.
 *
 * Authority over the shards ends `lease_seconds` after the check-in that renewed it was SENT. The
 * fail-safe begins the stop timeout plus `stopMarginMs` before that moment unless a later check-in
 * renewed it, so that every stop (each bounded by the stop timeout) has ENDED before authority does.
 *
 * A running shard is kept only while the plan holds its number under the same total_shards and
 * max_concurrency it was started with: a session belongs to its shard count, so after a reshard the
 * same number serves other guilds, and the session is stopped (reason `reshard`) and started again.
 *
 * A shard the plan moved to another node (stopped with reason `plan`, and not in the plan) may leave a
 * session for its new owner: the manager passes it on with the generation whose report releases it.
 */
import { Alarm, type AgentClock } from './clock.js'
import type { ClaimScheduler } from './claim-scheduler.js'
import type { PlanClaims } from './plan-claims.js'
import type { ResumableSession } from './session.js'
import type { SessionValues, ShardRunner, StopReason } from './shard-runner.js'

/** Why the node holds no authority over shards right now. */
export type AuthorityLoss = 'lease_expiring' | 'certificate_refused' | 'shutdown'

/** The longest stop timeout plus margin a lease admits: half of it, so a renewal has time to come. */
export function maxFailSafeLeadMs(leaseMs: number): number {
  return Math.floor(leaseMs / 2)
}

/** What the manager needs from the agent. */
export interface PlanManagerDeps {
  readonly clock: AgentClock
  readonly nodeId: string
  readonly runner: ShardRunner
  readonly scheduler: ClaimScheduler
  /** Margin before the end of authority at which every shard is stopped (ms), given the lease (ms). */
  stopMarginMs(leaseMs: number): number
  /** The longest a stop may take before it is abandoned (ms), given the lease (ms). */
  stopTimeoutMs(leaseMs: number): number
  /** The plan's lease cannot hold the stop timeout and margin: nothing may run (the agent halts). */
  leaseTooShort(detail: string): void
  /** How long a shard whose start failed waits before it is claimed again (ms). */
  readonly startRetryMs: number
  /** Shards were stopped for a newly applied generation: check in now so the new owner may start. */
  reportNow(): void
  /** A shard the plan of `generation` moved away stopped with `value` (unchecked) as its session. */
  keepSession(shardId: number, value: unknown, generation: number): void
  /** Authority ended (the fail-safe fired, or the certificate was refused). */
  authorityLost(reason: AuthorityLoss): void
}

/** Holds the accepted plan and reconciles the running shards with it. */
export class PlanManager {
  private plan: PlanClaims | null = null
  private authorityEndsAt: number | null = null
  private lost: AuthorityLoss | null = null
  private applied: number | null = null
  private readonly failSafe: Alarm

  constructor(private readonly deps: PlanManagerDeps) {
    this.failSafe = new Alarm(deps.clock, () => this.loseAuthority('lease_expiring'))
  }

  /** The last accepted plan, or null. */
  get accepted(): PlanClaims | null {
    return this.plan
  }

  /** The newest generation whose removals have all been stopped: the one to report. */
  get appliedGeneration(): number | null {
    return this.applied
  }

  /** End of authority on the monotonic clock, or null when the node holds none. */
  get authorityDeadline(): number | null {
    return this.lost === null ? this.authorityEndsAt : null
  }

  /** True while shards may run: a plan is accepted and the fail-safe's moment has not come. */
  hasAuthority(): boolean {
    if (this.plan === null || this.authorityEndsAt === null || this.lost !== null) return false
    return this.deps.clock.now() < this.authorityEndsAt - this.failSafeLeadMs(this.plan.lease_seconds * 1000)
  }

  /** How long before the end of authority the fail-safe begins: the stop timeout plus the margin. */
  failSafeLeadMs(leaseMs: number): number {
    return this.deps.stopTimeoutMs(leaseMs) + this.deps.stopMarginMs(leaseMs)
  }

  /** Accepts a verified plan from a check-in sent at `sentAt` (monotonic ms) and reconciles. */
  accept(plan: PlanClaims, sentAt: number): void {
    if (this.lost === 'shutdown') return
    const leaseMs = plan.lease_seconds * 1000
    const lead = this.failSafeLeadMs(leaseMs)
    if (lead > maxFailSafeLeadMs(leaseMs)) {
      const timeout = this.deps.stopTimeoutMs(leaseMs)
      const margin = this.deps.stopMarginMs(leaseMs)
      this.deps.leaseTooShort(
        `the stop timeout (${timeout} ms) and the stop margin (${margin} ms) do not fit the controller's lease of ${plan.lease_seconds} s: ` +
          `every shard must have stopped before the node's authority ends, so the fail-safe would begin ${lead} ms before it, ` +
          `more than half the lease (${maxFailSafeLeadMs(leaseMs)} ms), leaving renewals no time. Lower the stop timeout to at most ` +
          `${Math.max(0, maxFailSafeLeadMs(leaseMs) - margin)} ms or raise the controller's lease_seconds`,
      )
      return
    }
    this.plan = plan
    this.authorityEndsAt = sentAt + leaseMs
    this.lost = null // a renewal gives authority back (after the fail-safe, or a probable refusal)
    this.failSafe.arm(this.authorityEndsAt - lead - this.deps.clock.now())
    this.reconcile('plan')
  }

  /** Ends authority now: every shard stops (the fail-safe, a refused certificate, or shutdown). */
  loseAuthority(reason: AuthorityLoss): void {
    if (this.lost === 'shutdown' || this.lost === reason || (this.lost !== null && reason === 'lease_expiring')) return
    this.failSafe.cancel()
    this.lost = reason
    this.deps.authorityLost(reason)
    this.reconcile(reason)
  }

  /**
   * Called when a claim is granted: starts the shard (resuming `resume`, if handed over) if it is still
   * ours and authority holds. `claimedAt`: when the granted claim was sent (clock ms).
   */
  granted(shardId: number, resume: ResumableSession | null, claimedAt: number): void {
    const plan = this.plan
    if (plan === null || !this.hasAuthority() || !plan.assigned.includes(shardId)) return
    const { generation, total_shards, max_concurrency } = plan
    this.deps.runner.start({ nodeId: this.deps.nodeId, shardId, generation, totalShards: total_shards, maxConcurrency: max_concurrency, resume, grantClaimedAt: claimedAt })
  }

  /** Stops what the plan no longer holds, claims what it adds; reports the generation once stops succeed. */
  reconcile(reason: StopReason): void {
    const { runner, scheduler } = this.deps
    const plan = this.plan
    const authority = this.hasAuthority()
    const wanted = new Set(authority && plan ? plan.assigned : [])
    runner.forgetFailuresOlderThan(this.deps.startRetryMs)
    const stops: [number, StopReason][] = []
    for (const id of runner.held()) {
      if (!wanted.has(id)) stops.push([id, reason])
      else if (plan !== null && startedUnderOtherValues(runner.sessionValues(id), plan)) stops.push([id, 'reshard'])
    }
    scheduler.setWanted(
      [...wanted].filter((id) => !runner.has(id)),
      plan?.max_concurrency ?? 1,
    )
    if (plan === null) return
    const generation = plan.generation
    const resharded = stops.some(([, why]) => why === 'reshard')
    // Only a shard this plan gave to another node hands its session on (not one dropped with authority),
    // and only a session of this plan's shard count: one started under other values belongs to them.
    const keep = (id: number, why: StopReason) =>
      why === 'plan' && !plan.assigned.includes(id) && !startedUnderOtherValues(runner.sessionValues(id), plan)
        ? (value: unknown) => this.deps.keepSession(id, value, generation)
        : undefined
    void Promise.all(stops.map(([id, why]) => runner.stop(id, why, keep(id, why)))).then((results) => {
      if (!results.every(Boolean)) return // a stop failed: it is retried at the next reconcile
      const newer = this.applied === null || generation > this.applied
      if (newer) this.applied = generation
      if (stops.length === 0) return
      // A newer plan may want a shard that was still stopping when it came, and a reshard stop ended
      // a session the plan still gives this node: claim them now, under the plan's values.
      if ((this.plan !== plan || resharded) && this.lost === null) this.reconcile('plan')
      if (newer && reason === 'plan') this.deps.reportNow()
    })
  }

  /** Cancels the fail-safe timer (the agent is stopping). */
  close(): void {
    this.failSafe.cancel()
  }
}

/** True when a held shard's session was started under another total_shards or max_concurrency. */
function startedUnderOtherValues(values: SessionValues | null, plan: PlanClaims): boolean {
  return values !== null && (values.totalShards !== plan.total_shards || values.maxConcurrency !== plan.max_concurrency)
}
