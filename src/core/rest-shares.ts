/**
 * Max-min fair shares of one budget (SPEC "REST budget"), in whole units: the REST rate is counted in
 * hundredths of a request per second and the invalid-request budget in requests, so that sums are exact
 * and the shares of all nodes can never add up above the budget by a rounding error.
 * Pure: no clock, no I/O.
 */

/**
 * Water-filling: every demand is met in order from the smallest, each taking at most an equal part of
 * what is left, so a demand below the fair level is met whole and the rest is shared evenly among the
 * larger ones. The result never exceeds a demand, and it sums to at most `budget`.
 */
export function waterFill(demands: readonly number[], budget: number): number[] {
  const n = demands.length
  const shares = new Array<number>(n).fill(0)
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => demands[a]! - demands[b]! || a - b)
  let remaining = Math.max(0, Math.floor(budget))
  let left = n
  for (const i of order) {
    const fair = Math.floor(remaining / left)
    const share = Math.min(Math.max(0, Math.floor(demands[i]!)), fair)
    shares[i] = share
    remaining -= share
    left -= 1
  }
  return shares
}

/**
 * The invalid-request budget is a reserve against mistakes, not a rate a node spends steadily: the demands
 * are met as above, and what nobody asked for is spread too, in n + 1 parts, so a node that joins finds a
 * part unallocated and needs nobody's lowered share before it may send.
 */
export function spreadReserve(demands: readonly number[], budget: number): number[] {
  const shares = waterFill(demands, budget)
  let used = 0
  for (const share of shares) used += share
  const extra = Math.floor((Math.floor(budget) - used) / (shares.length + 1))
  return extra > 0 ? shares.map((share) => share + extra) : shares
}
