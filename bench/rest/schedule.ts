/**
 * The REST-budget scenario's timeline (issue 61 point 4), the same for the product run and the control
 * run: four bots with skewed demand (one wants 100/s, three 5/s); half-way one small bot leaves, three
 * quarters in a new one joins with 5/s, and it runs on to the end. Figures are taken over the steady
 * periods only: each phase less its first `settleMs` (time for check-ins to carry the new demand and
 * shares).
 */

/** The bots of the scenario: name and demand (requests per second). */
export interface BotPlan {
  readonly name: string
  readonly perSecond: number
}

/** The bots at the start, the one that leaves and the one that joins. */
export const SCENARIO_BOTS = {
  start: [
    { name: 'hungry', perSecond: 100 },
    { name: 'small-1', perSecond: 5 },
    { name: 'small-2', perSecond: 5 },
    { name: 'small-3', perSecond: 5 },
  ],
  leaves: 'small-3',
  joins: { name: 'small-4', perSecond: 5 },
} as const satisfies { start: readonly BotPlan[]; leaves: string; joins: BotPlan }

/** When things happen, in ms from the start of the run. */
export interface Schedule {
  readonly totalMs: number
  readonly leaveAtMs: number
  readonly joinAtMs: number
  /** Skipped at the start of each phase before its figures count. */
  readonly settleMs: number
}

/** One steady period: [fromMs, toMs) from the start of the run. */
export interface SteadyPeriod {
  readonly name: 'four nodes' | 'after the leave' | 'after the join'
  readonly fromMs: number
  readonly toMs: number
}

/** The timeline of a run of `totalMs`: the leave at 1/2, the join at 3/4. */
export function scheduleFor(totalMs: number, settleMs: number): Schedule {
  if (!(totalMs > 0) || !(settleMs >= 0)) throw new RangeError('the run needs a positive length and a settle time >= 0')
  const leaveAtMs = Math.round(totalMs / 2)
  const joinAtMs = Math.round((totalMs * 3) / 4)
  if (settleMs >= joinAtMs - leaveAtMs) throw new RangeError(`a run of ${totalMs / 1000} s is too short to settle for ${settleMs / 1000} s after each change`)
  return { totalMs, leaveAtMs, joinAtMs, settleMs }
}

/** The three steady periods of a schedule. */
export function steadyPeriods(s: Schedule): SteadyPeriod[] {
  return [
    { name: 'four nodes', fromMs: s.settleMs, toMs: s.leaveAtMs },
    { name: 'after the leave', fromMs: s.leaveAtMs + s.settleMs, toMs: s.joinAtMs },
    { name: 'after the join', fromMs: s.joinAtMs + s.settleMs, toMs: s.totalMs },
  ]
}
