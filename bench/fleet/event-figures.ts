/** Figures of the reshard restarts and slow-stop partitions for the summary, derived from the records. Pure. */
import { holdingIntervals, type Interval } from './check-overlaps.js'
import type { PartitionNote, ReshardNote } from './churn-runner.js'
import type { FleetRecord } from './protocol.js'

/** One reshard restart as the summary shows it. */
export interface ReshardFigures {
  readonly signal: 'SIGKILL' | 'SIGTERM'
  readonly fromShards: number
  readonly toShards: number
  readonly planTotalShards: number
  readonly downMs: number
  readonly allOnNewPlanMs: number | null
  /** Sessions of the old count still running at the stop, and ms from listening until the last of them stopped. */
  readonly oldSessions: number
  readonly lastOldStopMs: number | null
  /** ms from listening until the first session of the new count started (null: none did before the next reshard). */
  readonly firstNewStartMs: number | null
}

/** One partition as the summary shows it. */
export interface PartitionFigures {
  readonly node: string
  readonly cutMs: number
  /** Sessions the node ran when it was cut off, and ms from the cut until the last of them stopped. */
  readonly heldShards: number
  readonly lastStopMs: number | null
  /** The longest of those stops (call to end), and how many ended by the agent's abort. */
  readonly slowestStopMs: number | null
  readonly abortedStops: number
  /** Held sessions another node started (same shard and count) before the heal, and the closest old stop → new start gap. */
  readonly handedOn: number
  readonly minHandoffGapMs: number | null
}

const maxOrNull = (values: readonly number[]): number | null => (values.length === 0 ? null : Math.max(...values))
const minOrNull = (values: readonly number[]): number | null => (values.length === 0 ? null : Math.min(...values))

/** Figures per reshard restart; `endT` ends sessions never stopped. */
export function reshardFigures(records: readonly FleetRecord[], notes: readonly ReshardNote[], endT: number): ReshardFigures[] {
  const intervals = holdingIntervals(records, endT)
  return notes.map((n, i) => {
    // A new session is this reshard's only until the next reshard stops the controller.
    const until = notes[i + 1]?.stoppedAt ?? Infinity
    const old = intervals.filter((iv) => iv.totalShards === n.fromShards && iv.start < n.stoppedAt && iv.stop > n.stoppedAt)
    const fresh = intervals.filter((iv) => iv.totalShards === n.toShards && iv.start >= n.listeningAt && iv.start < until)
    return {
      signal: n.signal,
      fromShards: n.fromShards,
      toShards: n.toShards,
      planTotalShards: n.planTotalShards,
      downMs: n.listeningAt - n.stoppedAt,
      allOnNewPlanMs: n.allOnNewPlanMs,
      oldSessions: old.length,
      lastOldStopMs: maxOrNull(old.map((iv) => iv.stop - n.listeningAt)),
      firstNewStartMs: minOrNull(fresh.map((iv) => iv.start - n.listeningAt)),
    }
  })
}

/** Figures per partition; `endT` ends sessions never stopped. */
export function partitionFigures(records: readonly FleetRecord[], notes: readonly PartitionNote[], endT: number): PartitionFigures[] {
  const intervals = holdingIntervals(records, endT)
  const stops = records.filter((r): r is Extract<FleetRecord, { kind: 'stop' }> => r.kind === 'stop')
  return notes.map((n) => {
    const held = intervals.filter((iv) => iv.node === n.node && iv.start < n.from && iv.stop > n.from)
    const stopOf = (iv: Interval) => stops.find((r) => r.node === iv.node && r.shard === iv.shard && r.totalShards === iv.totalShards && r.t === iv.stop)
    const heldStops = held.map(stopOf).filter((r) => r !== undefined)
    const gaps: number[] = []
    for (const iv of held) {
      const next = intervals.filter((o) => o.node !== n.node && o.shard === iv.shard && o.totalShards === iv.totalShards && o.start >= n.from && o.start < n.to)
      if (next.length > 0) gaps.push(Math.min(...next.map((o) => o.start)) - iv.stop)
    }
    return {
      node: n.node,
      cutMs: n.to - n.from,
      heldShards: held.length,
      lastStopMs: maxOrNull(held.map((iv) => iv.stop - n.from)),
      slowestStopMs: maxOrNull(heldStops.map((r) => r.t - (r.calledAt ?? r.t))),
      abortedStops: heldStops.filter((r) => r.aborted === true).length,
      handedOn: gaps.length,
      minHandoffGapMs: minOrNull(gaps),
    }
  })
}
