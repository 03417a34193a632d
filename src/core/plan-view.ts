/** The operator's view of the plan (GET /v1/plan), built from the controller's parts after a settle. */
import type { HandoffLedger } from './handoffs.js'
import type { IdentifyLimiter } from './identify.js'
import type { LivePlan } from './live-plan.js'
import { NO_NODE, type NodeIndex } from './node-index.js'
import { planNodeView, type NodeRecord } from './node-record.js'
import { compareBytes } from './planner.js'
import type { Reshards } from './reshards.js'
import type { RestBudget } from './rest-budget.js'
import type { ControllerSettings, PlanView } from './types.js'

/** The parts of a controller the view reads. */
export interface PlanViewParts {
  readonly generation: number
  readonly settings: ControllerSettings
  readonly plan: LivePlan
  readonly live: ReadonlyMap<string, NodeRecord>
  readonly draining: ReadonlySet<string>
  readonly handoffs: HandoffLedger
  readonly nodes: NodeIndex
  readonly limiter: IdentifyLimiter
  readonly reshards: Reshards
  /** Leaves on purpose within the last hour, newest first. */
  readonly recentLeaves: readonly { readonly nodeId: string; readonly at: number }[]
  /** The REST budget's shares, or null without one. */
  readonly rest: RestBudget | null
}

/** The plan at `now`, nodes in byte order. */
export function planView(parts: PlanViewParts, now: number): PlanView {
  const { plan, draining, handoffs, nodes, reshards, live, settings, rest } = parts
  const views = plan.records.map((record, i) =>
    planNodeView(
      record,
      plan.rangeAt(i),
      draining.has(record.nodeId),
      handoffs.pendingFor(nodes.find(record.nodeId) ?? NO_NODE),
      reshards.nodeView(record.nodeId),
      rest === null ? null : rest.viewOf(now, record.nodeId),
    ),
  )
  return {
    generation: parts.generation,
    totalShards: settings.totalShards,
    maxConcurrency: settings.maxConcurrency,
    leaseSeconds: settings.leaseSeconds,
    unassigned: plan.unassigned,
    planner: settings.planner ?? 'contiguous',
    identify: parts.limiter.budget(now),
    pendingHandoffs: handoffs.pendingTotal(),
    reshard: reshards.view(),
    drainFlagsNotLive: [...draining].filter((nodeId) => !live.has(nodeId)).sort(compareBytes),
    recentLeaves: parts.recentLeaves,
    rest: rest === null ? null : rest.view(now),
    nodes: views,
  }
}
