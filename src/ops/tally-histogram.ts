/**
 * Histograms whose hot path is a bucket search and three number updates, for what is observed on every
 * connection or request (tally-counter.ts does the same for counters). prom-client's `observe` builds a
 * label object, validates and hashes the labels (a string per call) and allocates on every call; two of
 * them (the handshake's and the request's duration) showed as 9–17 µs of a resumed connection's profile
 * (`node dist/bench/profile-connections.js 15 ec resumed`). Here a series holds plain numbers, and the
 * registry reads them at scrape time in prom-client's own histogram shape (`le` first, then the labels;
 * cumulative buckets, `+Inf`, `_sum`, `_count`), so /metrics reads as before.
 */
import type { Histogram, Registry } from 'prom-client'

/** One label set's observations; the caller keeps it and calls `observe`. */
export class HistogramSeries {
  /** Observations per bucket (not cumulative): `counts[i]` holds those in (bounds[i-1], bounds[i]]. */
  private readonly counts: Float64Array
  private total = 0
  private observed = 0

  constructor(
    private readonly bounds: readonly number[],
    readonly labels: Readonly<Record<string, string>>,
  ) {
    this.counts = new Float64Array(bounds.length)
  }

  /**
   * One observation (a value above the last bound counts only toward `+Inf`, `_sum` and `_count`). A
   * value that is not finite is not counted: prom-client throws on it, and here it would make `_sum` NaN
   * or infinite for good (the durations observed are differences of performance.now(), always finite).
   */
  observe(value: number): void {
    if (!Number.isFinite(value)) return
    const bounds = this.bounds
    let i = 0
    while (i < bounds.length && value > bounds[i]!) i++
    if (i < bounds.length) this.counts[i]! += 1
    this.total += value
    this.observed += 1
  }

  /** The sum of the values observed (`_sum`). */
  get sum(): number {
    return this.total
  }

  /** How many values were observed (`_count`, and the `+Inf` bucket). */
  get count(): number {
    return this.observed
  }

  /** Back to no observations (the registry's resetMetrics()). */
  reset(): void {
    this.counts.fill(0)
    this.total = 0
    this.observed = 0
  }

  /** The cumulative count of observations at or below each bound. */
  cumulative(): number[] {
    let acc = 0
    return Array.from(this.counts, (n) => (acc += n))
  }
}

interface ExportedValue {
  readonly value: number
  readonly labels: Record<string, string | number>
  readonly metricName: string
}

/** A histogram metric on a registry, fed by the series it hands out. */
export class TallyHistogram<L extends string> {
  private readonly all: HistogramSeries[] = []
  private readonly bounds: readonly number[]

  constructor(config: { readonly name: string; readonly help: string; readonly buckets: readonly number[]; readonly labelNames: readonly L[]; readonly registers: Registry[] }) {
    const bounds = [...config.buckets]
    if (bounds.length === 0 || bounds.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= bounds[i - 1]!))) throw new RangeError(`${config.name}: buckets must be finite and increasing`)
    this.bounds = Object.freeze(bounds)
    const { name, help } = config
    const all = this.all
    const metric = {
      name,
      help,
      type: 'histogram',
      aggregator: 'sum',
      // What prom-client's Histogram.get() returns; the registry formats it.
      get: async () => {
        const values: ExportedValue[] = []
        for (const series of all) {
          const cumulative = series.cumulative()
          bounds.forEach((le, i) => values.push({ value: cumulative[i]!, labels: { le, ...series.labels }, metricName: `${name}_bucket` }))
          values.push({ value: series.count, labels: { le: '+Inf', ...series.labels }, metricName: `${name}_bucket` })
          values.push({ value: series.sum, labels: { ...series.labels }, metricName: `${name}_sum` })
          values.push({ value: series.count, labels: { ...series.labels }, metricName: `${name}_count` })
        }
        return { name, help, type: 'histogram', aggregator: 'sum', values }
      },
      reset: () => {
        for (const series of all) series.reset()
      },
    }
    // What the registry calls: get() (metrics(), getMetricsAsJSON()) and reset() (resetMetrics()); its
    // types admit prom-client's own classes only (and type `type` as a numeric enum it never uses).
    for (const registry of config.registers) registry.registerMetric(metric as unknown as Histogram)
  }

  /** A new series for one label set (`{}` without labels): made once, kept by the caller. */
  series(labels: Record<L, string>): HistogramSeries {
    const series = new HistogramSeries(this.bounds, labels)
    this.all.push(series)
    return series
  }
}
