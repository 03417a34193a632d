/**
 * Counters whose hot path is one number increment. prom-client's `inc` validates and hashes the labels
 * and allocates on every call (about 0.6 µs); here a request bumps a plain field it holds, and the totals
 * are copied into the prom-client counter when /metrics is scraped.
 */
import { Counter, type Registry } from 'prom-client'

/** One label set's running total. */
export interface Tally {
  value: number
}

/** A prom-client counter fed from tallies at scrape time. */
export class TallyCounter<L extends string> {
  private readonly entries: { readonly labels: Record<L, string>; readonly tally: Tally }[] = []

  constructor(config: { readonly name: string; readonly help: string; readonly labelNames: readonly L[]; readonly registers: Registry[] }) {
    const entries = this.entries
    new Counter<L>({
      ...config,
      labelNames: [...config.labelNames],
      collect(this: Counter<L>) {
        this.reset()
        for (const { labels, tally } of entries) this.inc(labels, tally.value)
      },
    })
  }

  /** A new tally for one label set; the caller keeps it (one tally per label set) and bumps `value`. */
  tally(labels: Record<L, string>): Tally {
    const tally = { value: 0 }
    this.entries.push({ labels, tally })
    return tally
  }
}

/** A one-label TallyCounter whose tallies are made on first use of a value and kept. */
export class KeyedTally<L extends string> {
  private readonly byValue = new Map<string, Tally>()

  /** @param initial label values whose series exist from the start at 0 (so rate() sees the first event) */
  constructor(
    private readonly counter: TallyCounter<L>,
    private readonly label: L,
    initial: readonly string[] = [],
  ) {
    for (const value of initial) this.of(value)
  }

  /** Counts one event with this label value. */
  inc(value: string): void {
    this.of(value).value += 1
  }

  private of(value: string): Tally {
    let tally = this.byValue.get(value)
    if (tally === undefined) {
      tally = this.counter.tally({ [this.label]: value } as Record<L, string>)
      this.byValue.set(value, tally)
    }
    return tally
  }
}
