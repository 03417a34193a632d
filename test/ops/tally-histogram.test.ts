// TallyHistogram (src/ops/tally-histogram.ts) exports exactly what prom-client's Histogram would for the
// same observations: the same /metrics text, so dashboards, alerts and scrapers see no change.
import t from 'tap'
import { Histogram, Registry } from 'prom-client'
import { TallyHistogram } from '../../src/ops/tally-histogram.js'

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.25, 1, 10]
// On a bound, between bounds, below the first, above the last, zero and a repeat.
const VALUES = [0.001, 0.0011, 0.0004, 12, 0, 0.25, 0.2, 0.2, 9.99]

t.test('labelled series: the same text as prom-client for the same observations', async (t) => {
  const theirs = new Registry()
  const ours = new Registry()
  const reference = new Histogram({ name: 'x_duration_seconds', help: 'Time per route', labelNames: ['route'], buckets: BUCKETS, registers: [theirs] })
  const tally = new TallyHistogram({ name: 'x_duration_seconds', help: 'Time per route', labelNames: ['route'], buckets: BUCKETS, registers: [ours] })
  // (series are exported in the order they were made; prom-client's, in the order of their first observation)
  const b = tally.series({ route: '/v1/identify' })
  const a = tally.series({ route: '/v1/checkin' })
  VALUES.forEach((v, i) => {
    reference.labels(i % 3 === 0 ? '/v1/identify' : '/v1/checkin').observe(v)
    ;(i % 3 === 0 ? b : a).observe(v)
  })
  const text = await ours.metrics()
  t.equal(text, await theirs.metrics())
  t.match(text, /^x_duration_seconds_bucket\{le="0\.25",route="\/v1\/checkin"\} 5$/m, 'cumulative, le first')
  t.match(text, /^x_duration_seconds_count\{route="\/v1\/identify"\} 3$/m)
})

t.test('an unlabelled histogram shows its zeros from the start, as prom-client does', async (t) => {
  const theirs = new Registry()
  const ours = new Registry()
  new Histogram({ name: 'y_seconds', help: 'One series', buckets: BUCKETS, registers: [theirs] })
  const series = new TallyHistogram({ name: 'y_seconds', help: 'One series', labelNames: [], buckets: BUCKETS, registers: [ours] }).series({})
  t.equal(await ours.metrics(), await theirs.metrics())
  series.observe(0.003)
  t.match(await ours.metrics(), /^y_seconds_bucket\{le="0\.005"\} 1$/m)
  t.match(await ours.metrics(), /^y_seconds_sum 0\.003$/m)
})

t.test("the registry's resetMetrics() empties the series; a value that is not finite is not counted", async (t) => {
  const registry = new Registry()
  const series = new TallyHistogram({ name: 'w_seconds', help: 'h', labelNames: [], buckets: BUCKETS, registers: [registry] }).series({})
  series.observe(0.5)
  series.observe(Number.NaN)
  series.observe(Number.POSITIVE_INFINITY)
  t.match(await registry.metrics(), /^w_seconds_count 1$/m)
  t.match(await registry.metrics(), /^w_seconds_sum 0\.5$/m)
  registry.resetMetrics()
  t.match(await registry.metrics(), /^w_seconds_count 0$/m)
  t.match(await registry.metrics(), /^w_seconds_bucket\{le="1"\} 0$/m)
  const json = await registry.getMetricsAsJSON()
  t.equal(json[0]?.type, 'histogram', 'getMetricsAsJSON reads it too')
})

t.test('buckets must be finite and increasing; a name is registered once', async (t) => {
  const registers = [new Registry()]
  t.throws(() => new TallyHistogram({ name: 'z1', help: 'h', labelNames: [], buckets: [], registers }), RangeError)
  t.throws(() => new TallyHistogram({ name: 'z2', help: 'h', labelNames: [], buckets: [0.1, 0.1], registers }), RangeError)
  t.throws(() => new TallyHistogram({ name: 'z3', help: 'h', labelNames: [], buckets: [0.1, Number.POSITIVE_INFINITY], registers }), RangeError)
  new TallyHistogram({ name: 'z4', help: 'h', labelNames: [], buckets: [1], registers })
  t.throws(() => new TallyHistogram({ name: 'z4', help: 'h', labelNames: [], buckets: [1], registers }), /already been registered/)
})
