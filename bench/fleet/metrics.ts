/** Figures derived from the records for the summary: moves, handoff gaps, restart renewals. Pure. */
import type { RestartNote } from './churn-runner.js'
import type { FleetRecord } from './protocol.js'

/** Shard starts on another node than the previous start of that shard, and the gaps between the two. */
export interface MoveFigures {
  readonly moves: number
  /** ms from the previous holder's stop to the new holder's start, per move (sorted). */
  readonly handoffGapsMs: number[]
}

/** Counts moves on the timeline. */
export function moveFigures(records: readonly FleetRecord[]): MoveFigures {
  const sorted = records.filter((r) => r.kind === 'start' || r.kind === 'stop').sort((a, b) => a.t - b.t)
  const lastStart = new Map<number, string>()
  const lastStop = new Map<number, { node: string; t: number }>()
  const gaps: number[] = []
  let moves = 0
  for (const r of sorted) {
    if (r.kind === 'stop') {
      lastStop.set(r.shard, { node: r.node, t: r.t })
      continue
    }
    if (r.kind !== 'start') continue
    const previous = lastStart.get(r.shard)
    if (previous !== undefined && previous !== r.node) {
      moves += 1
      const stop = lastStop.get(r.shard)
      if (stop !== undefined && stop.node === previous) gaps.push(r.t - stop.t)
    }
    lastStart.set(r.shard, r.node)
  }
  return { moves, handoffGapsMs: gaps.sort((a, b) => a - b) }
}

/** One restart as the summary shows it. */
export interface RestartFigures {
  readonly downMs: number
  /** ms from listening again until every expected node had a plan accepted (null: some never did). */
  readonly allRenewedMs: number | null
  readonly moved: number
  /** The generation judged against when the controller made a newer one durable between the read and the kill. */
  readonly rebasedTo: number | null
  readonly changedRenewals: number
  /** Agents whose fail-safe fired around the restart (their authority ran out before a renewal). */
  readonly authorityLost: number
  /** Expected nodes that never renewed (at most 5), and the fail-safe stops as `node@ms after the kill`. */
  readonly notRenewed: readonly string[]
  readonly failSafes: readonly string[]
}

/** Renewal times and fail-safe stops around each restart; nodes that left or were revoked since are not waited for. */
export function restartFigures(records: readonly FleetRecord[], notes: readonly RestartNote[], leaseMs: number, liveAtEnd: ReadonlySet<string>): RestartFigures[] {
  return notes.map((note) => {
    const expectedNodes = note.expected.filter((n) => liveAtEnd.has(n))
    const firstRenewal = new Map<string, number>()
    const failSafes: string[] = []
    for (const r of records) {
      if (r.kind !== 'event') continue
      if (r.event.type === 'plan_accepted' && r.t >= note.listeningAt && !firstRenewal.has(r.node)) firstRenewal.set(r.node, r.t)
      const expected = expectedNodes.includes(r.node)
      if (expected && r.event.type === 'authority_lost' && r.event.reason === 'lease_expiring' && r.t >= note.killedAt && r.t <= note.listeningAt + leaseMs) {
        failSafes.push(`${r.node}@${Math.round(r.t - note.killedAt)}`)
      }
    }
    const times = expectedNodes.map((n) => firstRenewal.get(n))
    const allRenewedMs = times.every((t) => t !== undefined) ? Math.max(0, ...times.map((t) => t! - note.listeningAt)) : null
    const notRenewed = expectedNodes.filter((n) => !firstRenewal.has(n)).slice(0, 5)
    return { downMs: note.listeningAt - note.killedAt, allRenewedMs, moved: note.moved, rebasedTo: note.rebasedTo, changedRenewals: note.changedRenewals, authorityLost: failSafes.length, notRenewed, failSafes: failSafes.slice(0, 10) }
  })
}

/** The value at percentile p (0..100) of a sorted array, or null when empty. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}
