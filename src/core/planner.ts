/**
 * The planner of SPEC "The planner": deterministic, capacity-weighted, contiguous shard ranges.
 * Pure: no I/O, no clock, no randomness. (By node name, for tests and benchmarks: test/support/planner-by-name.ts.)
 */

/** Byte-order comparison of ASCII names (UTF-16 code-unit order equals byte order for ASCII; never locale order). */
export function compareBytes(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/** A plan as parallel arrays over the input order (what the controller keeps: no object per node). */
export interface OrderedPlan {
  readonly starts: Int32Array
  readonly counts: Int32Array
  readonly assigned: number
}

/**
 * Steps 2-5 over nodes given by position (their byte order): capacity and drain flag (1) per node.
 * What the controller calls with the arrays it keeps, so a re-plan builds no object per node.
 */
export function planOrdered(totalShards: number, capacities: ArrayLike<number>, draining: ArrayLike<number>): OrderedPlan {
  return layContiguously(computeTargets(totalShards, capacities, draining))
}

/** Ranges laid back to back from shard 0 in node order, one per count (step 5). */
export function layContiguously(counts: Int32Array): OrderedPlan {
  const starts = new Int32Array(counts.length)
  let cursor = 0
  for (let i = 0; i < counts.length; i++) {
    starts[i] = cursor
    cursor += counts[i]!
  }
  return { starts, counts, assigned: cursor }
}

/** Steps 2-4: capacity-weighted targets, then the remainder handed out in whole passes. */
function computeTargets(totalShards: number, capacities: ArrayLike<number>, draining: ArrayLike<number>): Int32Array {
  const n = capacities.length
  let totalCapacity = 0
  for (let i = 0; i < n; i++) if (draining[i] !== 1) totalCapacity += capacities[i]!
  // S * capacity stays far below 2^53 (65536 * 128), so the floor is exact.
  const targets = new Int32Array(n)
  let given = 0
  if (totalCapacity > 0) {
    for (let i = 0; i < n; i++) {
      if (draining[i] === 1) continue
      const capacity = capacities[i]!
      targets[i] = Math.min(capacity, Math.floor((totalShards * capacity) / totalCapacity))
      given += targets[i]!
    }
  }
  let remainder = Math.min(totalShards, totalCapacity) - given
  // Each pass gives at least one shard or stops, and no node takes more than its capacity, so the
  // passes are bounded by the largest capacity. In fact remainder < the number of nodes with spare
  // capacity (it is a sum of fractional parts), so at most one pass runs: O(N).
  while (remainder > 0) {
    let givenInPass = 0
    for (let i = 0; i < n && remainder > 0; i++) {
      if (draining[i] === 1 || targets[i]! >= capacities[i]!) continue
      targets[i]! += 1
      remainder -= 1
      givenInPass += 1
    }
    if (givenInPass === 0) break
  }
  return targets
}

/**
 * What every planner plans from: the live nodes by position (their byte order) and the current plan over
 * the same positions (count 0 and `fresh` 1 for a node that joined since). SPEC "Planner choice".
 */
export interface PlanInput {
  readonly totalShards: number
  readonly capacities: ArrayLike<number>
  /** 1: draining. */
  readonly draining: ArrayLike<number>
  readonly currentStarts: ArrayLike<number>
  readonly currentCounts: ArrayLike<number>
  /** 1: joined since the current plan (it has no range in it). */
  readonly fresh: ArrayLike<number>
}

/** A planner: current plan + live set -> next plan. Pure. */
export type Planner = (input: PlanInput) => OrderedPlan

/** The planners a deployment chooses from (`"planner"` in the config). */
export type PlannerName = 'contiguous' | 'stable'

/** The contiguous planner (SPEC "The planner") behind the Planner interface: the current plan is not read. */
export const planContiguous: Planner = (input) => planOrdered(input.totalShards, input.capacities, input.draining)
