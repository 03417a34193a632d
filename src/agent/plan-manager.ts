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
 *
 * During a live reshard (SPEC "Live resharding") the plan also carries the next set: its shards run beside
 * the current ones, each session under its own key (shard count and number, agent/shard-key.ts). At the
 * switch the next set becomes the plan under the same keys, so those sessions keep running, and the old
 * set's keys are no longer wanted: they stop (reason `reshard`, no session handed on) — not at once but
 * after `switchGraceMs`: nodes learn of the switch at their own next check-in, and a next-set session
 * delivers only once its node has (ShardContext.serving), so the old set keeps delivering until every
 * node can have learned it. Around the switch a guild's events may reach the bot twice, never not at all.
 */

/** How long old-set sessions keep running after this node learned of a switch: a check-in interval with its jitter, and a request. */
export function switchGraceMs(leaseMs: number): number {
  return Math.ceil((leaseMs / 3) * 1.1) + 1000
}
import { Alarm, type AgentClock } from './clock.js'
import type { ClaimScheduler } from './claim-scheduler.js'
import type { PlanClaims } from './plan-claims.js'
import type { ResumableSession } from './session.js'
import type { SessionValues, ShardRunner, StopReason } from './shard-runner.js'
import { keyShard, keyTotal, shardKey } from './shard-key.js'

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
  /** Until when (clock ms) the old set of a switch this node just learned of keeps running, or null. */
  private switchGraceUntil: number | null = null
  /** The shard count of that old set. */
  private switchedFrom: number | null = null
  private readonly switchGrace: Alarm

  constructor(private readonly deps: PlanManagerDeps) {
    this.failSafe = new Alarm(deps.clock, () => this.loseAuthority('lease_expiring'))
    this.switchGrace = new Alarm(deps.clock, () => {
      this.switchGraceUntil = null
      if (this.lost === null) this.reconcile('plan')
    })
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

  /**
   * End of authority on the monotonic clock also after the fail-safe fired (the controller holds the
   * range until then: retry-slack.ts); null with no plan, or after a refused certificate or a shutdown.
   */
  get leaseDeadline(): number | null {
    return this.lost === null || this.lost === 'lease_expiring' ? this.authorityEndsAt : null
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
    const previous = this.plan
    if (previous?.next !== undefined && plan.next === undefined && plan.total_shards === previous.next.total_shards && plan.total_shards !== previous.total_shards) {
      // the switch of a live reshard: the old set keeps running a little (see the module comment)
      this.switchedFrom = previous.total_shards
      this.switchGraceUntil = this.deps.clock.now() + switchGraceMs(leaseMs)
      this.switchGrace.arm(switchGraceMs(leaseMs))
    }
    this.plan = plan
    this.authorityEndsAt = sentAt + leaseMs
    this.lost = null // a renewal gives authority back (after the fail-safe)
    this.failSafe.arm(this.authorityEndsAt - lead - this.deps.clock.now())
    this.reconcile('plan')
  }

  /** Ends authority now: every shard stops (the fail-safe, a definitively refused certificate, or shutdown). */
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
  granted(key: number, resume: ResumableSession | null, claimedAt: number, grantGeneration = 0): void {
    const plan = this.plan
    if (plan === null || !this.hasAuthority() || !wantedKeys(plan).has(key)) return
    const { generation, max_concurrency } = plan
    const totalShards = keyTotal(key)
    const set = totalShards === plan.total_shards ? 'current' : 'next'
    // A current-set grant from a generation past this plan's while a reshard is under way may come from
    // after the switch, where the same number means a shard of the new count: learn the plan first.
    if (plan.next !== undefined && set === 'current' && grantGeneration > generation) {
      this.deps.reportNow()
      return
    }
    // a next-set session delivers once the switch made its count the bot's; a current-set one until it stops
    const serving = set === 'next' ? () => this.plan !== null && this.plan.total_shards === totalShards : () => true
    this.deps.runner.start({ key, nodeId: this.deps.nodeId, shardId: keyShard(key), generation, totalShards, maxConcurrency: max_concurrency, set, resume: set === 'next' ? null : resume, grantClaimedAt: claimedAt, serving })
  }

  /** Which set a key's claim is for under the accepted plan, or null when it is in neither. */
  setOf(key: number): 'current' | 'next' | null {
    const plan = this.plan
    if (plan === null) return null
    const totalShards = keyTotal(key)
    if (totalShards === plan.total_shards) return 'current'
    return plan.next !== undefined && totalShards === plan.next.total_shards ? 'next' : null
  }

  /** Stops what the plan no longer holds, claims what it adds; reports the generation once stops succeed. */
  reconcile(reason: StopReason): void {
    const { runner, scheduler } = this.deps
    const plan = this.plan
    const authority = this.hasAuthority()
    const wanted = authority && plan ? wantedKeys(plan) : new Set<number>()
    runner.forgetFailuresOlderThan(this.deps.startRetryMs)
    const stops: [number, StopReason][] = []
    const graceFor = this.switchGraceUntil !== null && this.deps.clock.now() < this.switchGraceUntil ? this.switchedFrom : null
    for (const key of runner.held()) {
      if (!wanted.has(key) && reason === 'plan' && graceFor !== null && keyTotal(key) === graceFor) continue // the switch's old set, for now
      if (!wanted.has(key)) stops.push([key, reason === 'plan' && plan !== null && !inPlanSets(key, plan) ? 'reshard' : reason])
      else if (plan !== null && startedUnderOtherValues(runner.sessionValues(key), plan)) stops.push([key, 'reshard'])
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
    const keep = (key: number, why: StopReason) =>
      why === 'plan' && keyTotal(key) === plan.total_shards && !plan.assigned.includes(keyShard(key)) && !startedUnderOtherValues(runner.sessionValues(key), plan)
        ? (value: unknown) => this.deps.keepSession(keyShard(key), value, generation)
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

  /**
   * The node leaves (SPEC "Leaving on purpose"): from now on no plan is accepted, no grant starts a shard
   * and no timer fires; the agent stops the shards itself (reason `leave`, keeping their sessions).
   */
  leave(): void {
    this.lost = 'shutdown'
    this.close()
  }

  /** Cancels the fail-safe timer (the agent is stopping). */
  close(): void {
    this.failSafe.cancel()
    this.switchGrace.cancel()
  }
}

/** True when a held shard's session was started under another max_concurrency (its shard count is in its key). */
function startedUnderOtherValues(values: SessionValues | null, plan: PlanClaims): boolean {
  return values !== null && values.maxConcurrency !== plan.max_concurrency
}

/** The keys of every shard the plan gives this node: the current set's and a live reshard's next set's. */
export function wantedKeys(plan: PlanClaims): Set<number> {
  const keys = new Set<number>()
  for (const shardId of plan.assigned) keys.add(shardKey(plan.total_shards, shardId))
  if (plan.next !== undefined) for (const shardId of plan.next.assigned) keys.add(shardKey(plan.next.total_shards, shardId))
  return keys
}

/** True when a key's shard count is one of the plan's sets (else it belongs to another shard count: a reshard). */
function inPlanSets(key: number, plan: PlanClaims): boolean {
  const totalShards = keyTotal(key)
  return totalShards === plan.total_shards || (plan.next !== undefined && totalShards === plan.next.total_shards)
}
