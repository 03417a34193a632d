/**
 * prom-client's default process metrics, less the work a scrape would do per open connection on the
 * event loop. The controller holds a connection per node: at 10,000 of them, one scrape of the
 * defaults took 14–18 ms of the main thread, most of it in three gauges:
 * - `nodejs_active_handles` and `nodejs_active_resources` (and their `_total`s) list every libuv handle
 *   (`process._getActiveHandles()`, `process.getActiveResourcesInfo()`), twice per scrape, and group them
 *   by class name: a Node debugging aid. The controller's own gauges say what matters here
 *   (`pxe_tls_connections_open`, `pxe_tls_handshakes_in_flight`), so these are dropped;
 * - `process_open_fds` reads `/proc/self/fd` (one entry per connection) with readdirSync. It matters to an
 *   operator (descriptors against `process_max_fds`), so it stays, read by libuv's thread pool instead.
 * Side by side with 10,000 sockets open (Node 24, 20 scrapes each): 14–18 ms of the main thread per
 * scrape of the defaults, 2.1–2.4 ms of these (process CPU 15–20 ms against 11–12 ms).
 * In a take-over of 10,000 nodes the new leader spent 4.5 % of its busy main thread on scrapes (the
 * fleet bench reads /metrics about once a second) while every node waited for its renewal.
 */
import { readdir } from 'node:fs/promises'
import { Gauge, collectDefaultMetrics, type Registry } from 'prom-client'

/** Default metrics whose collection walks every open handle; not registered. */
export const DROPPED_DEFAULT_METRICS = ['nodejs_active_handles', 'nodejs_active_handles_total', 'nodejs_active_resources', 'nodejs_active_resources_total'] as const

const OPEN_FDS = 'process_open_fds'
const FD_DIR = '/proc/self/fd'

/** Registers the default process metrics on `registry`, as described above. */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry })
  for (const name of DROPPED_DEFAULT_METRICS) registry.removeSingleMetric(name)
  // prom-client registers it on Linux only (there is no /proc elsewhere); replaced in the same case.
  if (registry.getSingleMetric(OPEN_FDS) === undefined) return
  registry.removeSingleMetric(OPEN_FDS)
  // Scrapes at the same moment share one reading: the ops port's 16 connections must not queue 16
  // directory reads on the thread pool the journal's writes use too.
  let reading: Promise<number | null> | null = null
  const openFds = (): Promise<number | null> =>
    (reading ??= readdir(FD_DIR).then(
      // Minus the descriptor the read itself holds open (as prom-client's own gauge does).
      (entries) => entries.length - 1,
      () => null,
    ).finally(() => (reading = null)))
  new Gauge({
    name: OPEN_FDS,
    help: 'Number of open file descriptors.',
    registers: [registry],
    async collect() {
      const count = await openFds()
      // null: no reading this time; the gauge keeps its last value (prom-client's does the same)
      if (count !== null) this.set(count)
    },
  })
}
