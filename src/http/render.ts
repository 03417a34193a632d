/** Core views → the SPEC's JSON shapes (snake_case, ISO 8601 times). */
import type { DailyBudget } from '../core/identify.js'
import type { IdentifyOutcome, PlanView } from '../core/types.js'

export function renderIdentify(out: IdentifyOutcome): Record<string, unknown> {
  if (out.granted) {
    if (out.set !== undefined) return { granted: true, mode: out.mode, set: out.set, shard_id: out.shardId, bucket: out.bucket, generation: out.generation }
    const answer = { granted: true, mode: out.mode, shard_id: out.shardId, bucket: out.bucket, generation: out.generation }
    if (out.session === undefined) return answer
    const { sessionId, sequence, resumeUrl } = out.session
    return { ...answer, session: { session_id: sessionId, sequence, resume_url: resumeUrl } }
  }
  return { granted: false, retry_after_ms: out.retryAfterMs, reason: out.reason }
}

/** SPEC "Operator view": nulls without a daily limit. */
function renderBudget(budget: DailyBudget | null): Record<string, unknown> {
  if (budget === null) return { daily_limit: null, used_24h: null, remaining: null, next_release_at: null }
  const nextReleaseAt = budget.nextReleaseAt === null ? null : new Date(budget.nextReleaseAt).toISOString()
  return { daily_limit: budget.dailyLimit, used_24h: budget.used24h, remaining: budget.remaining, next_release_at: nextReleaseAt }
}

export function renderPlan(view: PlanView): Record<string, unknown> {
  return {
    generation: view.generation,
    total_shards: view.totalShards,
    max_concurrency: view.maxConcurrency,
    lease_seconds: view.leaseSeconds,
    unassigned: view.unassigned,
    planner: view.planner,
    identify: renderBudget(view.identify),
    pending_handoffs: view.pendingHandoffs,
    reshard: renderReshard(view.reshard),
    drain_flags_not_live: view.drainFlagsNotLive,
    recent_leaves: view.recentLeaves.map((l) => ({ node_id: l.nodeId, left_at: new Date(l.at).toISOString() })),
    rest: renderRest(view.rest),
    nodes: view.nodes.map((n) => ({
      node_id: n.nodeId,
      capacity: n.capacity,
      draining: n.draining,
      range_start: n.rangeStart,
      range_count: n.rangeCount,
      last_seen: new Date(n.lastSeen).toISOString(),
      generation: n.generation,
      ready_shards: n.readyShards,
      starting_shards: n.startingShards,
      backoff_shards: n.backoffShards,
      fatal_shards: n.fatalShards,
      pending_handoffs: n.pendingHandoffs,
      cert_not_after: n.certNotAfter === null ? null : new Date(n.certNotAfter).toISOString(),
      next: n.next === null ? null : { range_start: n.next.rangeStart, range_count: n.next.rangeCount, ready_shards: n.next.readyShards },
      rest: n.rest === null ? null : { per_second: n.rest.perSecond, invalid_budget: n.rest.invalidBudget, demand: { per_second: n.rest.demand.perSecond, invalid_10m: n.rest.demand.invalid10m } },
    })),
  }
}

function renderRest(rest: PlanView['rest']): Record<string, unknown> | null {
  if (rest === null) return null
  return {
    global_per_second: rest.globalPerSecond,
    safety: rest.safety,
    budget_per_second: rest.budgetPerSecond,
    invalid_budget: rest.invalidBudget,
    allocated_per_second: rest.allocatedPerSecond,
    allocated_invalid: rest.allocatedInvalid,
    demand_per_second: rest.demandPerSecond,
  }
}

function renderReshard(reshard: PlanView['reshard']): Record<string, unknown> | null {
  if (reshard === null) return null
  if (reshard.phase === 'restart_barrier') {
    return { phase: reshard.phase, total_shards: reshard.totalShards, generation: reshard.generation, waiting_nodes: reshard.waitingNodes }
  }
  return {
    phase: reshard.phase,
    from_total_shards: reshard.fromTotalShards,
    total_shards: reshard.totalShards,
    generation: reshard.generation,
    ready_shards: reshard.readyShards,
    unassigned: reshard.unassigned,
    pending_handoffs: reshard.pendingHandoffs,
  }
}
