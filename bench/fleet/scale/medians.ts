/** The medians of `npm run bench:fleet -- --repeat n`: the figures a closing note quotes, one line per phase. */
import type { BenchFigures } from './fleet-bench.js'
import { failedAttempts } from './fleet-bench.js'
import { atCeiling, coldJoinBreakdown } from './ceiling-costs.js'

/** The median of some numbers (the mean of the middle two for an even count); null when none is known. */
export function median(values: readonly (number | null)[]): number | null {
  const known = values.filter((v): v is number => v !== null && Number.isFinite(v)).sort((a, b) => a - b)
  if (known.length === 0) return null
  const mid = Math.floor(known.length / 2)
  return known.length % 2 === 1 ? known[mid]! : (known[mid - 1]! + known[mid]!) / 2
}

const fmt = (v: number | null, digits = 1, unit = ' s') => (v === null ? '-' : `${v.toFixed(digits)}${unit}`)

/** One line per phase: the median of each figure over the runs, and the range (lowest–highest) of the headline one. */
export function medianLines(runs: readonly BenchFigures[]): string[] {
  const m = (pick: (f: BenchFigures) => number | null) => median(runs.map(pick))
  const range = (pick: (f: BenchFigures) => number | null) => {
    const vs = runs.map(pick).filter((v): v is number => v !== null)
    return vs.length === 0 ? '-' : `${Math.min(...vs).toFixed(1)}–${Math.max(...vs).toFixed(1)} s`
  }
  const ceilingJoin = (f: BenchFigures) => (f.ceiling === null ? null : atCeiling(f.ceiling, f.coldJoin.counters.handshakes ?? 0, 0))
  const ceilingRestart = (f: BenchFigures) => (f.ceiling === null ? null : atCeiling(f.ceiling, f.restart.handshakes - f.restart.resumedHandshakes, f.restart.resumedHandshakes))
  const lines = [
    `medians of ${runs.length} runs (load average at the starts: ${runs.map((f) => f.loadAverage.start.toFixed(2)).join(', ')}):`,
    `  ceiling            full ${fmt(m((f) => f.ceiling?.fullMs ?? null), 2, ' ms')}, resumed ${fmt(m((f) => f.ceiling?.resumedMs ?? null), 2, ' ms')} per connection, a renewal arriving alone ${fmt(m((f) => f.ceiling?.renewalMs ?? null), 2, ' ms')}`,
    `  (a) cold join      stable after ${fmt(m((f) => f.coldJoin.stableS))} (runs ${range((f) => f.coldJoin.stableS)}); every node joined after ${fmt(m((f) => f.coldJoin.allJoinedS))}; failed attempts ${fmt(m((f) => failedAttempts(f.coldJoin.counters)), 0, '')}, deferred ${fmt(m((f) => f.coldJoin.counters.deferred ?? 0), 0, '')}; controller CPU ${fmt(m((f) => f.coldJoin.controllerCpuS))} (re-plans ${fmt(m((f) => f.coldJoin.replanS), 2)}; at the ceiling ${fmt(m(ceilingJoin))}); renewals on open connections ${fmt(m((f) => coldJoinBreakdown(f)?.renewalsS ?? null))}, the joins themselves ${fmt(m((f) => coldJoinBreakdown(f)?.joinsS ?? null))}: ${fmt(m((f) => coldJoinBreakdown(f)?.ratio ?? null), 2, '×')} the ceiling's cost; the whole phase at the ceiling's costs ${fmt(m((f) => coldJoinBreakdown(f)?.atCeilingS ?? null))} (the ceiling's own reading ${fmt(m((f) => coldJoinBreakdown(f)?.ceilingOwnRatio ?? null), 2, '×')}; the controller's phase less re-plans ${fmt(m((f) => coldJoinBreakdown(f)?.vsCeilingPhase ?? null), 2, '×')} that)`,
    `  (b) ${runs[0]!.restart.kind === 'takeover' ? 'take-over     ' : 'restart       '} every node renewed ${fmt(m((f) => f.restart.allRenewedS))} after the kill (runs ${range((f) => f.restart.allRenewedS)}); fail-safe would have fired first on ${fmt(m((f) => f.restart.failSafeLate), 0, '')} nodes; shards moved ${fmt(m((f) => f.restart.movedShards), 0, '')}; failed attempts ${fmt(m((f) => f.restart.failedAttempts), 0, '')}, deferred ${fmt(m((f) => f.restart.deferred), 0, '')}; controller CPU ${fmt(m((f) => f.restart.controllerCpuS))} (at the ceiling ${fmt(m(ceilingRestart))})`,
    `  (c) steady state   controller CPU ${fmt(m((f) => f.steady.controllerCpuPerS), 3, ' s')} per second at ${fmt(m((f) => f.steady.checkinsPerS), 0, '')} check-ins/s`,
  ]
  if (runs[0]!.restart.kind === 'takeover') {
    lines.push(`  take-over: every node renewed ${fmt(m((f) => f.restart.allRenewedS))} after the kill; shards moved ${fmt(m((f) => f.restart.movedShards), 0, '')}; full handshakes ${fmt(m((f) => f.restart.handshakes - f.restart.resumedHandshakes), 0, '')}, resumed ${fmt(m((f) => f.restart.resumedHandshakes), 0, '')} (medians)`)
  }
  if (runs.every((f) => f.drain !== null)) {
    lines.push(`  (d) drain          Identify grants ${fmt(m((f) => f.drain!.grants), 0, '')}, resumes ${fmt(m((f) => f.drain!.resumes), 0, '')}; every moved shard running after ${fmt(m((f) => f.drain!.allRunningS))}; slowest drain request ${fmt(m((f) => Math.max(...f.drain!.requestMs)), 0, ' ms')} (on the open connection: ${fmt(m((f) => (f.drain!.answerMs.length === 0 ? null : Math.max(...f.drain!.answerMs))), 0, ' ms')})`)
  }
  if (runs.every((f) => f.ha?.drainRequests != null)) {
    lines.push(`      etcd writes     over the drain requests: puts ${fmt(m((f) => f.ha!.drainRequests!.puts), 0, '')}, deletes ${fmt(m((f) => f.ha!.drainRequests!.deletes), 0, '')}, transactions ${fmt(m((f) => f.ha!.drainRequests!.txns), 0, '')}; leader main thread ${fmt(m((f) => f.ha!.drainMainThreadS), 2)}`)
  }
  return lines
}
