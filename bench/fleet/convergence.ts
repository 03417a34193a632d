/**
 * Has the fleet settled? The controller's plan holds exactly the nodes that should be live, every such
 * node has accepted the current generation and runs exactly its range (each session started with the
 * plan's total_shards, so that a reshard is judged on the new count), nobody else runs anything, and
 * no shard is left unassigned that the capacity of the live, undrained nodes could take.
 */
import type { FleetLedger } from './ledger.js'
import type { OperatorPlan } from './operator-client.js'
import type { NodeSpec } from './scenario.js'

/** The verdict, with the first reasons it is not settled. */
export interface Convergence {
  readonly converged: boolean
  readonly problems: string[]
  /** Shards running on exactly their owner. */
  readonly runningAsPlanned: number
  /** Every problem is a node running part of its range and nothing else (what a spent daily budget leaves). */
  readonly onlyShort: boolean
}

const MAX_PROBLEMS = 8

/** Every running session lies in the range and was started with `total` shards. */
function isSubset(a: ReadonlyMap<number, number>, start: number, count: number, total: number): boolean {
  for (const [s, of] of a) if (s < start || s >= start + count || of !== total) return false
  return true
}

function sameSet(a: ReadonlyMap<number, number>, start: number, count: number, total: number): boolean {
  return a.size === count && isSubset(a, start, count, total)
}

/** Judges the fleet against the plan `plan` read from the controller. */
export function judgeConvergence(plan: OperatorPlan, ledger: FleetLedger, live: readonly NodeSpec[], draining: ReadonlySet<string>): Convergence {
  const problems: string[] = []
  let other = 0
  const note = (p: string, short = false) => {
    if (!short) other += 1
    if (problems.length < MAX_PROBLEMS) problems.push(p)
  }
  const expected = new Set(live.map((n) => n.name))
  const inPlan = new Set(plan.nodes.map((n) => n.node_id))
  for (const name of expected) if (!inPlan.has(name)) note(`${name} is not in the plan`)
  let runningAsPlanned = 0
  for (const n of plan.nodes) {
    if (!expected.has(n.node_id)) note(`${n.node_id} is still in the plan`)
    const accepted = ledger.plans.get(n.node_id)
    if (accepted?.generation !== plan.generation) note(`${n.node_id} accepted generation ${accepted?.generation ?? 'none'}, the plan is at ${plan.generation}`)
    const running = ledger.runningOn(n.node_id)
    const stale = [...running.values()].filter((of) => of !== plan.total_shards).length
    if (sameSet(running, n.range_start, n.range_count, plan.total_shards)) runningAsPlanned += n.range_count
    else if (stale > 0) note(`${n.node_id} runs ${stale} sessions of another shard count than the plan's ${plan.total_shards}`)
    else note(`${n.node_id} runs ${running.size} shards, its range holds ${n.range_count}`, isSubset(running, n.range_start, n.range_count, plan.total_shards))
  }
  for (const [node, shards] of ledger.running) if (!inPlan.has(node) && shards.size > 0) note(`${node} runs ${shards.size} shards outside the plan`)
  const capacity = live.filter((n) => !draining.has(n.name)).reduce((sum, n) => sum + n.capacity, 0)
  const unassignedExpected = Math.max(0, plan.total_shards - capacity)
  if (plan.unassigned !== unassignedExpected) note(`${plan.unassigned} shards unassigned, the live capacity (${capacity}) leaves ${unassignedExpected}`)
  return { converged: problems.length === 0, problems, runningAsPlanned, onlyShort: other === 0 }
}
