/**
 * The scenario's figures from a run's record and the emulator's: global and route 429s, invalid requests
 * (per client and in total), bans, the most requests in any sliding second, and per steady period the
 * requests the emulator answered 200 per second, the utilisation of the safe budget (that rate ÷
 * global_per_second × safety), each bot's rate and each node's mean share and demand.
 */
import type { RestRequestRecord, RestStats } from '../../test/support/gateway/rest-records.js'
import type { ScenarioRecord } from './scenario-run.js'
import { steadyPeriods } from './schedule.js'
import { maxShareSum, sendsAboveShare, type OverShare } from './share-check.js'
import type { ShareChange } from './product-side.js'

/** The budget the product shares (config `rest`); the control is judged against the same. */
export const REST_CONFIG = { global_per_second: 50, safety: 0.9, invalid_per_10_minutes: 10_000 } as const
/** The safe budget in requests per second (45). */
export const SAFE_PER_SECOND = REST_CONFIG.global_per_second * REST_CONFIG.safety

/** One bot within one steady period. */
export interface BotInPeriod {
  readonly name: string
  /** What it wanted (requests/s). */
  readonly wanted: number
  /** Requests answered 200 per second. */
  readonly okPerSecond: number
  /** Its node's mean share and demand over the period (product only). */
  readonly meanShare: number | null
  readonly meanDemand: number | null
}

/** One steady period. */
export interface PeriodFigures {
  readonly name: string
  readonly fromS: number
  readonly toS: number
  /** 200 answers the emulator gave per second. */
  readonly okPerSecond: number
  /** okPerSecond ÷ SAFE_PER_SECOND. */
  readonly utilisation: number
  /** Requests that reached the emulator per second (any answer). */
  readonly reachedPerSecond: number
  readonly bots: readonly BotInPeriod[]
}

/** One bot over the whole run. */
export interface BotTotals {
  readonly name: string
  readonly wanted: number
  readonly unmet: number
  readonly issued: number
  readonly ok: number
  readonly failed: number
  /** 429s with X-RateLimit-Global the bot met (from the emulator directly, or passed on by its proxy). */
  readonly global429Met: number
  /** Invalid answers the bot's own client met (401, 403, 429; in the product its proxy's own 429s, which never reach Discord). */
  readonly invalidMet: number
}

/** Everything a run measured. */
export interface RunFigures {
  readonly label: 'product' | 'control'
  readonly seconds: number
  readonly requests: number
  readonly global429: number
  readonly route429: number
  readonly invalidTotal: number
  /** Invalid requests by client as the emulator counted them: by node (the client header: the bot in the control, the tap in the product). */
  readonly invalidByClient: Readonly<Record<string, number>>
  readonly bans: number
  readonly maxInAnyWindow: number
  readonly periods: readonly PeriodFigures[]
  readonly bots: readonly BotTotals[]
  /** The largest sum of the shares the nodes' proxies held at one moment (product only; the safe budget is 45). */
  readonly maxShareSum: number | null
  /** Windows of 1 s in which a node sent more than its share allowed (product only; share-check.ts). */
  readonly overShare: readonly OverShare[]
  /** The longest event-loop stall of the run (ms): the jitter allowance of that check, at least 100 ms. */
  readonly maxLoopDelayMs: number
}

const mean = (xs: readonly number[]): number | null => (xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length)

/** The figures of a run, from its record, the emulator's stats and request records, and (product) the shares given. */
export function runFigures(run: ScenarioRecord, stats: RestStats, requests: readonly RestRequestRecord[], shares: readonly ShareChange[] | null): RunFigures {
  const inRun = requests.map((r) => ({ ...r, t: r.at - run.emulatorZeroMs }))
  const periods = steadyPeriods(run.schedule).map((p): PeriodFigures => {
    const seconds = (p.toMs - p.fromMs) / 1000
    const within = inRun.filter((r) => r.t >= p.fromMs && r.t < p.toMs)
    const ok = within.filter((r) => r.status === 200).length
    const bots = run.bots
      .filter((b) => b.fromMs <= p.fromMs + 1 && b.toMs >= p.toMs - 1)
      .map((b) => {
        const okIn = b.counts.okAt.filter((at) => at - run.perfZeroMs >= p.fromMs && at - run.perfZeroMs < p.toMs).length
        const samples = run.samples.filter((s) => s.node === b.name && s.atMs >= p.fromMs && s.atMs < p.toMs)
        return {
          name: b.name,
          wanted: b.perSecond,
          okPerSecond: okIn / seconds,
          meanShare: mean(samples.map((s) => s.share)),
          meanDemand: mean(samples.map((s) => s.demand)),
        }
      })
    return { name: p.name, fromS: p.fromMs / 1000, toS: p.toMs / 1000, okPerSecond: ok / seconds, utilisation: ok / seconds / SAFE_PER_SECOND, reachedPerSecond: within.length / seconds, bots }
  })
  return {
    label: run.label,
    seconds: run.schedule.totalMs / 1000,
    requests: stats.requests,
    global429: stats.global429,
    route429: stats.route429,
    invalidTotal: Object.values(stats.invalidByClient).reduce((a, b) => a + b, 0),
    invalidByClient: stats.invalidByClient,
    bans: stats.bans.length,
    maxInAnyWindow: stats.maxInAnyWindow,
    periods,
    bots: run.bots.map((b) => ({
      name: b.name,
      wanted: b.counts.wanted,
      unmet: b.counts.unmet,
      issued: b.counts.issued,
      ok: b.counts.ok,
      failed: b.counts.failed,
      global429Met: b.counts.global429,
      invalidMet: b.counts.invalid,
    })),
    maxShareSum: shares === null ? null : maxShareSum(shares).sum,
    overShare: shares === null ? [] : sendsAboveShare(requests, shares, run.perfZeroMs - run.emulatorZeroMs, run.perfZeroMs, run.maxLoopDelayMs),
    maxLoopDelayMs: run.maxLoopDelayMs,
  }
}
