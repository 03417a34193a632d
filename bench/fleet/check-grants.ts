/**
 * Identify grants: "no two grants in one bucket closer than the interval" and "nothing above the daily
 * budget". The agents record every grant they receive, but a receipt trails the decision by the state
 * write (fsync) and the network, so receipt times cannot show the spacing. The controller's audit log
 * records each grant in the request that decided it, so the spacing is checked on the audited times.
 * Those trail the decision too, by what the controller does in between (a re-plan, the audit lines
 * written before it) and by any time the process was not scheduled: on a loaded 2-core machine up to
 * tens of ms. So a gap counts as a violation only below the interval minus SPACING_TOLERANCE_MS (50 ms,
 * still well above Discord's own 5 s window at the default 5100 ms). The audit line does not carry the
 * decision's own clock reading; if it did, this check could be exact.
 */
import { z } from 'zod'
import type { ReceivedGrant } from './ledger.js'
import type { Violation } from './violations.js'

/** A grant as the controller's audit log records it. */
export interface AuditGrant {
  readonly time: number
  readonly node: string
  readonly shard: number
  readonly bucket: number
  readonly generation: number
}

const grantLineSchema = z.object({
  event: z.literal('identify_granted'),
  time: z.string(),
  node_id: z.string(),
  shard_id: z.number().int(),
  bucket: z.number().int(),
  generation: z.number().int(),
})

/** The `identify_granted` lines of an audit log (other lines, and a torn last line, are skipped). */
export function readAuditGrants(text: string): AuditGrant[] {
  const out: AuditGrant[] = []
  for (const line of text.split('\n')) {
    if (!line.includes('"identify_granted"')) continue
    let json: unknown
    try {
      json = JSON.parse(line)
    } catch {
      continue
    }
    const parsed = grantLineSchema.safeParse(json)
    if (!parsed.success) continue
    const g = parsed.data
    out.push({ time: Date.parse(g.time), node: g.node_id, shard: g.shard_id, bucket: g.bucket, generation: g.generation })
  }
  return out
}

/** How far an audited gap may fall short of the interval before it counts (see the module comment). */
export const SPACING_TOLERANCE_MS = 50
const DAY_MS = 86_400_000

/** What the check needs. */
export interface GrantInput {
  readonly audited: readonly AuditGrant[]
  readonly received: readonly ReceivedGrant[]
  readonly intervalMs: number
  readonly maxConcurrency: number
  readonly dailyLimit: number
}

/** Findings and figures. */
export interface GrantReport {
  readonly violations: Violation[]
  /** Smallest gap between two audited grants of one bucket (null with fewer than two in any bucket). */
  readonly minAuditedGapMs: number | null
  /** Smallest gap between two received grants of one bucket, receipt times (latency included). */
  readonly minReceivedGapMs: number | null
  /** Most grants in any rolling 24 hours, audited and received. */
  readonly peakDailyAudited: number
  readonly peakDailyReceived: number
}

function minGap<T>(items: readonly T[], bucketOf: (item: T) => number, timeOf: (item: T) => number, onGap: (a: T, b: T, gap: number) => void): number | null {
  const byBucket = new Map<number, T[]>()
  for (const item of items) {
    const list = byBucket.get(bucketOf(item))
    if (list === undefined) byBucket.set(bucketOf(item), [item])
    else list.push(item)
  }
  let min: number | null = null
  for (const list of byBucket.values()) {
    list.sort((a, b) => timeOf(a) - timeOf(b))
    for (let i = 1; i < list.length; i++) {
      const gap = timeOf(list[i]!) - timeOf(list[i - 1]!)
      onGap(list[i - 1]!, list[i]!, gap)
      min = min === null ? gap : Math.min(min, gap)
    }
  }
  return min
}

/** The most events within any window of `windowMs` (times in any order). */
function peakInWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b)
  let peak = 0
  let head = 0
  for (let i = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[head]! >= windowMs) head += 1
    peak = Math.max(peak, i - head + 1)
  }
  return peak
}

/** Runs the check. */
export function checkGrants(input: GrantInput): GrantReport {
  const violations: Violation[] = []
  const minAuditedGapMs = minGap(input.audited, (g) => g.bucket, (g) => g.time, (a, b, gap) => {
    if (gap < input.intervalMs - SPACING_TOLERANCE_MS) {
      const at = new Date(a.time).toISOString()
      violations.push({ kind: 'grant_spacing', detail: `bucket ${b.bucket}: shard ${a.shard} (${a.node}, ${at}) and shard ${b.shard} (${b.node}) granted ${gap} ms apart` })
    }
  })
  const minReceivedGapMs = minGap(input.received, (g) => g.shard % input.maxConcurrency, (g) => g.t, () => undefined)
  const audited = new Map<string, number>()
  for (const g of input.audited) audited.set(`${g.node}#${g.shard}#${g.generation}`, (audited.get(`${g.node}#${g.shard}#${g.generation}`) ?? 0) + 1)
  for (const g of input.received) {
    const key = `${g.node}#${g.shard}#${g.generation}`
    const left = audited.get(key) ?? 0
    if (left === 0) violations.push({ kind: 'unaudited_grant', detail: `${g.node} received a grant for shard ${g.shard} (generation ${g.generation}) that the audit log does not hold` })
    else audited.set(key, left - 1)
  }
  const peakDailyAudited = peakInWindow(input.audited.map((g) => g.time), DAY_MS)
  const peakDailyReceived = peakInWindow(input.received.map((g) => g.t), DAY_MS)
  for (const [what, peak] of [['audited', peakDailyAudited], ['received', peakDailyReceived]] as const) {
    if (peak > input.dailyLimit) violations.push({ kind: 'daily_budget', detail: `${peak} grants ${what} within 24 hours, above the daily budget of ${input.dailyLimit}` })
  }
  return { violations, minAuditedGapMs, minReceivedGapMs, peakDailyAudited, peakDailyReceived }
}
