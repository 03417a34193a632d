/** The planner a deployment runs, chosen once at start by name (SPEC "Planner choice"). */
import { planContiguous, type Planner, type PlannerName } from './planner.js'
import { planStable } from './stable-planner.js'

export const PLANNER_NAMES: readonly PlannerName[] = ['contiguous', 'stable']

/** The planner of a name (contiguous when none is given: the default). */
export function plannerFor(name: PlannerName | undefined): Planner {
  return name === 'stable' ? planStable : planContiguous
}
