/**
 * The stable planner of SPEC "Planner choice": the contiguous planner's shape (one range per live node in
 * byte order, never over capacity, draining nodes hold nothing, unassigned = max(0, S - C)) planned from the
 * current plan so that as few shards as possible change owner. Pure: no I/O, no clock, no randomness.
 *
 * One re-plan is two steps (both exported for the property tests):
 * 1. stableStep, the smallest move: surviving nodes keep their ranges (clipped to capacity); a node that
 *    joined takes what lies unassigned at its place in the order, then carves the rest of its fair share
 *    ceil(S * cap / C) out of its two neighbours' ranges (each kept at or above its lower bound); the shards
 *    of nodes that left (or drained, or of a capacity cut) go to the nodes on either side of the gap, up to
 *    their upper bound, and further out only where those lack room.
 * 2. rebalance, the balance bound (docs/moving-shards.md "Planner choice"): every non-draining node holds between
 *    floor(min(cap, fair) / 2) and min(cap, max(1, ceil(2 * fair))) shards, fair = S * cap / C. A node
 *    outside is fixed by re-laying the smallest window of neighbours around it (doubling) whose shards,
 *    laid capacity-weighted over the window, put every node of the window inside the bound; shards outside
 *    the window do not move. The whole fleet as a window is the contiguous plan, which is always inside.
 * When every node is inside the bound after step 1, step 2 changes nothing. Over the same live set the
 * result is a fixed point (the same plan again), which is what a restart relies on.
 */
import { layContiguously, planOrdered, type OrderedPlan, type PlanInput } from './planner.js'

/** Per-node balance bounds and join wants over the non-draining nodes. */
export interface Bounds {
  readonly totalCapacity: number
  readonly lo: Int32Array
  readonly hi: Int32Array
  /** A joining node's share: min(cap, ceil(S * cap / C)). */
  readonly want: Int32Array
}

/** The balance bound of each node (0..0 for draining nodes). S * cap <= 65536 * 128 * 2, far below 2^53. */
export function balanceBounds(totalShards: number, capacities: ArrayLike<number>, draining: ArrayLike<number>): Bounds {
  const n = capacities.length
  let total = 0
  for (let i = 0; i < n; i++) if (draining[i] !== 1) total += capacities[i]!
  const lo = new Int32Array(n)
  const hi = new Int32Array(n)
  const want = new Int32Array(n)
  if (total > 0) {
    for (let i = 0; i < n; i++) {
      if (draining[i] === 1) continue
      const cap = capacities[i]!
      const share = totalShards * cap // fair = share / total
      lo[i] = totalShards >= total ? Math.floor(cap / 2) : Math.floor(share / (2 * total))
      hi[i] = Math.min(cap, Math.max(1, Math.floor((2 * share + total - 1) / total)))
      want[i] = Math.min(cap, Math.floor((share + total - 1) / total))
    }
  }
  return { totalCapacity: total, lo, hi, want }
}

/** The stable planner: stableStep, then rebalance. */
export function planStable(input: PlanInput): OrderedPlan {
  const bounds = balanceBounds(input.totalShards, input.capacities, input.draining)
  return rebalance(input, stableStep(input, bounds), bounds)
}

/** True when the current ranges are laid in order inside 0..S-1 without overlap (else they are not used). */
function currentIsUsable(input: PlanInput): boolean {
  const { totalShards, currentStarts, currentCounts } = input
  let end = 0
  let held = 0
  for (let i = 0; i < currentCounts.length; i++) {
    const count = currentCounts[i]!
    if (count === 0) continue
    const start = currentStarts[i]!
    if (count < 0 || start < end || start + count > totalShards) return false
    end = start + count
    if (input.draining[i] !== 1) held += 1
  }
  return held > 0
}

/** Step 1: the smallest move from the current plan to one over the live set (see the module doc). */
export function stableStep(input: PlanInput, bounds = balanceBounds(input.totalShards, input.capacities, input.draining)): OrderedPlan {
  const { totalShards, capacities, draining, currentStarts, currentCounts, fresh } = input
  const n = capacities.length
  // Nothing to keep (a first plan, unusable stored ranges, no capacity): the contiguous layout.
  if (bounds.totalCapacity === 0 || !currentIsUsable(input)) return planOrdered(totalShards, capacities, draining)
  const counts = new Int32Array(n)
  // Anchors: nodes keeping shards; gap[k] lies before anchor k (gap[anchors.length]: after the last one).
  const anchors: number[] = []
  const gap: number[] = []
  let end = 0
  for (let i = 0; i < n; i++) {
    if (draining[i] === 1 || currentCounts[i]! === 0) continue
    counts[i] = Math.min(currentCounts[i]!, capacities[i]!)
    gap.push(currentStarts[i]! - end)
    anchors.push(i)
    end = currentStarts[i]! + counts[i]!
  }
  gap.push(totalShards - end)
  const room = (i: number) => (draining[i] === 1 ? 0 : Math.max(0, bounds.hi[i]! - counts[i]!))
  const surplus = (i: number) => Math.max(0, counts[i]! - bounds.lo[i]!)
  for (let k = 0; k <= anchors.length; k++) {
    const from = k === 0 ? 0 : anchors[k - 1]! + 1
    const to = k === anchors.length ? n : anchors[k]!
    for (let j = from; j < to; j++) {
      if (fresh[j] !== 1 || draining[j] === 1) continue
      const taken = Math.min(bounds.want[j]!, gap[k]!)
      counts[j] = taken
      gap[k]! -= taken
      const need = bounds.want[j]! - taken
      if (need > 0) carveFromNeighbours(counts, j, need, surplus, from - 1, to)
    }
  }
  for (let k = 0; k <= anchors.length; k++) {
    if (gap[k]! > 0) gap[k] = fillGap(counts, anchors, k, gap[k]!, room, n)
  }
  return layOut(totalShards, counts, anchors, gap)
}

/**
 * A joining node at `j` takes up to `need` shards from the nearest holders on each side (no further than
 * the anchors `first` and `last` around its gap, so that no range in between shifts), half from each.
 */
function carveFromNeighbours(counts: Int32Array, j: number, need: number, surplus: (i: number) => number, first: number, last: number): void {
  let left = j - 1
  while (left > first && counts[left]! === 0) left--
  let right = j + 1
  while (right < last && counts[right]! === 0) right++
  const leftSpare = left >= 0 && counts[left]! > 0 ? surplus(left) : 0
  const rightSpare = right < counts.length && counts[right]! > 0 ? surplus(right) : 0
  let fromLeft = Math.min(leftSpare, Math.ceil(need / 2))
  const fromRight = Math.min(rightSpare, need - fromLeft)
  fromLeft = Math.min(leftSpare, need - fromRight)
  if (fromLeft > 0) counts[left]! -= fromLeft
  if (fromRight > 0) counts[right]! -= fromRight
  counts[j]! += fromLeft + fromRight
}

/**
 * Gives the `amount` shards of gap k to the nodes around it: half to the anchor on each side, then the
 * nodes inside the gap, each up to its room; what is left travels outward, nearest node with room first
 * (the ranges in between shift over, which moves their shards: only where the nearer nodes are full).
 * Returns what stays unassigned (only when no node has room).
 */
function fillGap(counts: Int32Array, anchors: readonly number[], k: number, amount: number, room: (i: number) => number, n: number): number {
  let left = k === 0 ? -1 : anchors[k - 1]!
  let right = k === anchors.length ? n : anchors[k]!
  const give = (i: number, most: number) => {
    const given = Math.min(most, room(i))
    counts[i]! += given
    amount -= given
  }
  if (left >= 0) give(left, right < n ? Math.ceil(amount / 2) : amount)
  if (right < n) give(right, amount)
  if (left >= 0) give(left, amount)
  for (let j = left + 1; j < right && amount > 0; j++) give(j, amount)
  left -= 1
  right += 1
  while (amount > 0 && (left >= 0 || right < n)) {
    if (left >= 0) give(left--, amount)
    if (amount > 0 && right < n) give(right++, amount)
  }
  return amount
}

/** Ranges from counts, in order, with what stays unassigned of gap k laid just before anchor k. */
function layOut(totalShards: number, counts: Int32Array, anchors: readonly number[], gap: readonly number[]): OrderedPlan {
  const n = counts.length
  const starts = new Int32Array(n)
  let cursor = 0
  let assigned = 0
  let k = 0
  for (let i = 0; i < n; i++) {
    if (k < anchors.length && anchors[k] === i) cursor += gap[k++]!
    starts[i] = cursor
    cursor += counts[i]!
    assigned += counts[i]!
  }
  if (cursor + gap[anchors.length]! !== totalShards) throw new RangeError('stable planner: ranges do not add up to total_shards')
  return { starts, counts, assigned }
}

/** Step 2: re-lays a window of neighbours around every node outside the balance bound (see the module doc). */
export function rebalance(input: PlanInput, plan: OrderedPlan, bounds: Bounds): OrderedPlan {
  const { totalShards, capacities, draining } = input
  const n = capacities.length
  // With S >= C every node is full (no room left anywhere), which is inside the bound.
  if (totalShards >= bounds.totalCapacity) return plan
  const counts = plan.counts
  const inBound = (i: number) => counts[i]! >= bounds.lo[i]! && counts[i]! <= (draining[i] === 1 ? 0 : bounds.hi[i]!)
  let changed = false
  for (let v = 0; v < n; v++) {
    if (inBound(v)) continue
    changed = true
    for (let w = 1; ; w *= 2) {
      const a = Math.max(0, v - w)
      const b = Math.min(n - 1, v + w)
      let held = 0
      for (let i = a; i <= b; i++) held += counts[i]!
      const window = planOrdered(held, Int32Array.from({ length: b - a + 1 }, (_, i) => capacities[a + i]!), Uint8Array.from({ length: b - a + 1 }, (_, i) => draining[a + i]!))
      const whole = a === 0 && b === n - 1
      let fits = window.assigned === held
      for (let i = a; fits && i <= b; i++) {
        const c = window.counts[i - a]!
        fits = c >= bounds.lo[i]! && c <= (draining[i] === 1 ? 0 : bounds.hi[i]!)
      }
      if (fits || whole) {
        counts.set(window.counts, a)
        break
      }
    }
  }
  if (!changed) return plan
  return layContiguously(counts)
}
