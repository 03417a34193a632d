// The default process metrics without the per-handle walks (src/ops/process-metrics.ts): the dropped
// gauges are gone, and process_open_fds, now read off the main thread, still counts descriptors.
import t from 'tap'
import { closeSync, openSync, readdirSync } from 'node:fs'
import { Registry } from 'prom-client'
import { DROPPED_DEFAULT_METRICS, collectProcessMetrics } from '../../src/ops/process-metrics.js'
import { Scrape, parseMetrics } from './scrape.js'

const read = async (registry: Registry): Promise<Scrape> => {
  const text = await registry.metrics()
  return new Scrape(text, parseMetrics(text))
}

t.test('the gauges that list every open handle are not registered; the other defaults are', async (t) => {
  const registry = new Registry()
  collectProcessMetrics(registry)
  const s = await read(registry)
  for (const name of DROPPED_DEFAULT_METRICS) {
    t.equal(registry.getSingleMetric(name), undefined, `${name} not registered`)
    t.notOk(s.text.includes(`${name} `) || s.text.includes(`${name}{`), `${name} not in the scrape`)
  }
  t.ok((s.value('process_cpu_seconds_total') ?? -1) >= 0)
  t.ok(s.value('nodejs_eventloop_lag_seconds') !== undefined)
  t.ok(s.value('nodejs_heap_size_used_bytes') !== undefined)
  t.ok(s.value('nodejs_active_requests_total') !== undefined, 'active requests stay: they are few, not one per connection')
})

t.test('process_open_fds counts the descriptors the process holds', { skip: process.platform !== 'linux' && 'Linux only (/proc/self/fd)' }, async (t) => {
  const registry = new Registry()
  collectProcessMetrics(registry)
  const help = (await registry.metrics()).match(/^# HELP process_open_fds (.*)$/m)
  t.equal(help?.[1], 'Number of open file descriptors.', 'the name and help of prom-client’s own gauge')
  const before = (await read(registry)).value('process_open_fds')!
  t.ok(Math.abs(before - (readdirSync('/proc/self/fd').length - 1)) <= 2, `near the directory's count (${before})`)
  const fds = Array.from({ length: 40 }, () => openSync('/dev/null', 'r'))
  try {
    const during = (await read(registry)).value('process_open_fds')!
    t.ok(during - before >= 38 && during - before <= 42, `40 more descriptors open: ${during - before} more counted`)
  } finally {
    for (const fd of fds) closeSync(fd)
  }
  const after = (await read(registry)).value('process_open_fds')!
  t.ok(Math.abs(after - before) <= 2, `and fewer once closed (${after} against ${before})`)
})

t.test('scrapes at the same moment share one reading of the descriptors', { skip: process.platform !== 'linux' && 'Linux only (/proc/self/fd)' }, async (t) => {
  const registry = new Registry()
  collectProcessMetrics(registry)
  const texts = await Promise.all(Array.from({ length: 8 }, () => registry.metrics()))
  const counts = texts.map((text) => new Scrape(text, parseMetrics(text)).value('process_open_fds'))
  t.equal(new Set(counts).size, 1, `every scrape the same count (${counts.join(', ')})`)
  t.ok(counts[0]! > 0)
})
