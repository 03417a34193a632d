/**
 * Has the fleet settled? The controller's plan holds exactly the nodes that should be live, every such
 * node has accepted the current generation and runs exactly its range, nobody else runs anything, and
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

function isSubset(a: ReadonlySet<number>, start: number, count: number): boolean {
  for (const s of a) if (s < start || s >= start + count) return false
  return true
}

function sameSet(a: ReadonlySet<number>, start: number, count: number): boolean {
  if (a.size !== count) return false
  for (let s = start; s < start + count; s++) if (!a.has(s)) return false
  return true
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
    if (sameSet(running, n.range_start, n.range_count)) runningAsPlanned += n.range_count
    else note(`${n.node_id} runs ${running.size} shards, its range holds ${n.range_count}`, isSubset(running, n.range_start, n.range_count))
  }
  for (const [node, shards] of ledger.running) if (!inPlan.has(node) && shards.size > 0) note(`${node} runs ${shards.size} shards outside the plan`)
  const capacity = live.filter((n) => !draining.has(n.name)).reduce((sum, n) => sum + n.capacity, 0)
  const unassignedExpected = Math.max(0, plan.total_shards - capacity)
  if (plan.unassigned !== unassignedExpected) note(`${plan.unassigned} shards unassigned, the live capacity (${capacity}) leaves ${unassignedExpected}`)
  return { converged: problems.length === 0, problems, runningAsPlanned, onlyShort: other === 0 }
}
