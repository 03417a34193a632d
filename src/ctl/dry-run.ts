/**
 * What a drain would do, computed from the fetched plan with the product's own planner (SPEC "Planner
 * choice"): the nodes in byte order, their capacities and drain flags with NODE flagged, and the current
 * ranges (the stable planner plans from them). Pure: changes nothing anywhere.
 */
import { compareBytes, type PlannerName } from '../core/planner.js'
import { PLANNER_NAMES, plannerFor } from '../core/planners.js'
import { CtlError, shown } from './errors.js'
import type { Plan } from './wire.js'

/** One node's range now and after the drain. */
export interface NodeChange {
  readonly node_id: string
  readonly range_start: number
  readonly range_count: number
  readonly next_range_start: number
  readonly next_range_count: number
}

/** The result of a dry run (also what -o json prints). */
export interface DryRun {
  readonly node_id: string
  readonly planner: PlannerName
  /** False when the plan does not say which planner runs (then contiguous, the default, is assumed). */
  readonly planner_reported: boolean
  readonly generation: number
  /** Shards that would change owner (an assigned shard that would end up unassigned counts too). */
  readonly moved: number
  /** Moved shards per new owner, in byte order; `null` key rendered as "unassigned" is kept apart. */
  readonly to: Record<string, number>
  readonly to_unassigned: number
  readonly total_shards: number
  /** Shards without a node now (the plan's `unassigned`) and after the drain. */
  readonly unassigned_now: number
  readonly unassigned_after: number
  /** Shards the drain would leave without a node beyond those now: the controller refuses it unless forced. */
  readonly stranded: number
  readonly nodes: NodeChange[]
}

/** The planner the plan names (contiguous when it names none); throws CtlError for one this pxe-ctl does not know. */
export function plannerOf(plan: Plan): PlannerName {
  const name = plan.planner ?? 'contiguous'
  if (!(PLANNER_NAMES as readonly string[]).includes(name)) throw new CtlError(`the controller plans with ${shown(name)}, which this pxe-ctl does not know; upgrade pxe-ctl to dry-run a drain`)
  return name as PlannerName
}

function owners(totalShards: number, starts: ArrayLike<number>, counts: ArrayLike<number>): Int32Array {
  const owner = new Int32Array(totalShards).fill(-1)
  for (let i = 0; i < counts.length; i++) for (let s = starts[i]!; s < starts[i]! + counts[i]! && s < totalShards; s++) owner[s] = i
  return owner
}

/** The plan with `nodeId` flagged for drain, compared shard by shard with the current one. */
export function dryRunDrain(plan: Plan, nodeId: string): DryRun {
  const planner = plannerOf(plan)
  const nodes = [...plan.nodes].sort((a, b) => compareBytes(a.node_id, b.node_id))
  const n = nodes.length
  const capacities = Int32Array.from(nodes, (x) => x.capacity)
  const draining = Uint8Array.from(nodes, (x) => (x.draining || x.node_id === nodeId ? 1 : 0))
  const currentStarts = Int32Array.from(nodes, (x) => x.range_start)
  const currentCounts = Int32Array.from(nodes, (x) => x.range_count)
  // Every node of a fetched plan has its range in it: none joined since (the controller re-plans at once).
  const next = plannerFor(planner)({ totalShards: plan.total_shards, capacities, draining, currentStarts, currentCounts, fresh: new Uint8Array(n) })
  const before = owners(plan.total_shards, currentStarts, currentCounts)
  const after = owners(plan.total_shards, next.starts, next.counts)
  const perTarget = new Int32Array(n)
  let moved = 0
  let toUnassigned = 0
  for (let s = 0; s < plan.total_shards; s++) {
    if (before[s] === -1 || before[s] === after[s]) continue
    moved += 1
    if (after[s] === -1) toUnassigned += 1
    else perTarget[after[s]!]! += 1
  }
  const to: Record<string, number> = {}
  nodes.forEach((x, i) => {
    if (perTarget[i]! > 0) to[x.node_id] = perTarget[i]!
  })
  return {
    node_id: nodeId,
    planner,
    planner_reported: plan.planner !== undefined,
    generation: plan.generation,
    moved,
    to,
    to_unassigned: toUnassigned,
    total_shards: plan.total_shards,
    unassigned_now: plan.unassigned,
    unassigned_after: plan.total_shards - next.assigned,
    stranded: Math.max(0, plan.total_shards - next.assigned - plan.unassigned),
    nodes: nodes.map((x, i) => ({ node_id: x.node_id, range_start: x.range_start, range_count: x.range_count, next_range_start: next.starts[i]!, next_range_count: next.counts[i]! })),
  }
}

/** `12 shards would move: 8 to a, 4 to b` (the line the SPEC asks for). */
export function movedLine(d: DryRun): string {
  if (d.moved === 0) return '0 shards would move'
  const targets = Object.entries(d.to).map(([node, k]) => `${k} to ${node}`)
  if (d.to_unassigned > 0) targets.push(`${d.to_unassigned} to no node (unassigned: no capacity left)`)
  return `${d.moved} shard${d.moved === 1 ? '' : 's'} would move: ${targets.join(', ')}`
}

/** `4 of 12 shards would be left without a node (1 now)`: what the drain leaves unassigned, for the dry run. */
export function unassignedLine(d: DryRun): string {
  const now = d.unassigned_now === 0 ? '' : ` (${d.unassigned_now} now)`
  if (d.stranded > 0) {
    return `${d.unassigned_after} of ${d.total_shards} shards would be left without a node${now}: the other live nodes lack the capacity; the drain needs --force`
  }
  if (d.unassigned_after === 0) return '0 shards would be left without a node'
  return `${d.unassigned_after} of ${d.total_shards} shards would be left without a node, as now (no more than before the drain)`
}

/** Why pxe-ctl refuses a drain that strands shards (SPEC "Operator endpoints": it says so before asking the controller). */
export function strandedRefusal(d: DryRun): string {
  const now = d.unassigned_now === 0 ? '' : `${d.unassigned_now} have none now; `
  return `draining ${d.node_id} would leave ${d.unassigned_after} of ${d.total_shards} shards without a node (${now}the other live nodes lack the capacity); add capacity or pass --force`
}
