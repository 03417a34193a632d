// deploy/grafana/pxe-controller.json: a Grafana dashboard that imports on any install (its Prometheus
// comes from a ${datasource} variable, no data source UID of ours), whose every query names only metrics
// the controller's own registry exports (built as src/ops builds it), and that shows what the issue asks.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { ControllerMetrics } from '../../src/ops/metrics.js'

const FILE = fileURLToPath(new URL('../../deploy/grafana/pxe-controller.json', import.meta.url))
const dashboard = JSON.parse(readFileSync(FILE, 'utf8'))

interface Panel {
  id: number
  type: string
  title: string
  description?: string
  datasource?: { type: string; uid: string }
  gridPos: { h: number; w: number; x: number; y: number }
  targets?: { expr: string; refId: string; datasource?: { type: string; uid: string } }[]
  panels?: Panel[]
}
const panels: Panel[] = (dashboard.panels as Panel[]).flatMap((p) => [p, ...(p.panels ?? [])])
const queries = panels.flatMap((p) => (p.targets ?? []).map((q) => ({ panel: p.title, expr: q.expr })))

/** The series names Prometheus stores for the registry's metrics (a histogram as _bucket, _sum, _count). */
async function exportedSeries(): Promise<Set<string>> {
  const metrics = new ControllerMetrics({ totalShards: 64, dailyIdentifyLimit: 1000 }) // the budget gauges exist only with a limit
  const names = new Set<string>()
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    const type = String(m.type)
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(m.name + s)
    else if (type === 'summary') for (const s of ['', '_sum', '_count']) names.add(m.name + s)
    else names.add(m.name)
  }
  return names
}

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'inf', 'nan'])

/** The metric names a PromQL expression selects: identifiers outside strings, label matchers, ranges and grouping lists that are not functions or keywords. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
  return [...bare.matchAll(/(?<![\w.$])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])(?!\s*\()/g)].map((m) => m[1]!).filter((n) => !KEYWORDS.has(n.toLowerCase()))
}

t.test('metricNames reads PromQL as the test needs it', async (t) => {
  t.same(metricNames('histogram_quantile(0.99, sum by (route, le) (rate(pxe_request_duration_seconds_bucket{job=~"$job", status=~"4..|5.."}[$__rate_interval])))'), ['pxe_request_duration_seconds_bucket'])
  t.same(metricNames('max(pxe_nodes_live{a="b"} and on (job, instance) (pxe_is_leader{a="b"} == 1))'), ['pxe_nodes_live', 'pxe_is_leader'])
  t.same(metricNames('pxe_crl_next_update_timestamp_seconds - time() < 14 * 86400 offset 5m'), ['pxe_crl_next_update_timestamp_seconds'])
})

t.test('the dashboard JSON: schema, variables, no install-specific UIDs', async (t) => {
  t.ok(dashboard.schemaVersion >= 36 && dashboard.schemaVersion <= 41, `schemaVersion ${dashboard.schemaVersion}`)
  t.equal(dashboard.id, null, 'no database id (import assigns one)')
  t.type(dashboard.title, 'string')
  const vars = dashboard.templating.list as { name: string; type: string; query: unknown; datasource?: { uid: string } }[]
  t.match(vars[0], { name: 'datasource', type: 'datasource', query: 'prometheus' }, 'the first variable picks the Prometheus data source')
  for (const v of vars.slice(1)) t.same(v.datasource, { type: 'prometheus', uid: '${datasource}' }, `variable ${v.name} queries that data source`)
  // every "uid" in the file: the dashboard's own, the built-in annotation source, or the variable
  const uids: string[] = []
  JSON.stringify(dashboard, (key, value) => (key === 'uid' && uids.push(value), value))
  t.same(uids.filter((u) => u !== '${datasource}' && u !== '-- Grafana --'), [dashboard.uid], 'no data source UID of a particular install')
  t.match(dashboard.uid, /^[a-z0-9-]{1,40}$/)
  t.equal(new Set(panels.map((p) => p.id)).size, panels.length, 'panel ids are unique')
  for (const p of panels) {
    t.ok(p.gridPos.x >= 0 && p.gridPos.w > 0 && p.gridPos.x + p.gridPos.w <= 24, `${p.title}: inside the 24-column grid`)
    if (p.type === 'row') continue
    t.same(p.datasource, { type: 'prometheus', uid: '${datasource}' }, `${p.title}: the variable data source`)
    t.ok((p.description ?? '').length > 20, `${p.title}: a description says what it shows`)
    t.ok((p.targets ?? []).length > 0, `${p.title}: has queries`)
    const refIds = (p.targets ?? []).map((q) => q.refId)
    t.equal(new Set(refIds).size, refIds.length, `${p.title}: refIds unique`)
  }
  // no two panels cover the same cell
  const cells = new Set<string>()
  for (const p of panels) {
    for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x++) {
      for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y++) {
        t.notOk(cells.has(`${x},${y}`), `${p.title}: cell ${x},${y} is free`)
        cells.add(`${x},${y}`)
      }
    }
  }
})

t.test('every query names only metrics the controller exports', async (t) => {
  const exported = await exportedSeries()
  t.ok(queries.length > 20, `${queries.length} queries`)
  for (const { panel, expr } of queries) {
    const names = metricNames(expr)
    t.ok(names.length > 0, `${panel}: ${expr} selects a metric`)
    for (const name of names) t.ok(exported.has(name), `${panel}: ${name} is exported`)
    let depth = 0
    for (const ch of expr) if ((depth += ch === '(' ? 1 : ch === ')' ? -1 : 0) < 0) break
    t.equal(depth, 0, `${panel}: balanced parentheses`)
    t.match(expr, /job=~"\$job", instance=~"\$instance"/, `${panel}: follows the job and instance variables`)
  }
})

t.test('it shows what an operator watches', async (t) => {
  const used = new Set(queries.flatMap((q) => metricNames(q.expr)))
  const wanted = [
    'pxe_nodes_live', 'pxe_nodes_draining', 'pxe_shards', 'pxe_shards_unassigned', 'pxe_plan_generation',
    'pxe_checkins_total', 'pxe_identify_claims_total', 'pxe_identify_daily_budget_remaining', 'pxe_requests_total',
    'pxe_request_duration_seconds_bucket', 'pxe_tls_handshake_failures_total', 'pxe_rate_limited_total',
    'pxe_state_write_duration_seconds_bucket', 'pxe_crl_next_update_timestamp_seconds', 'pxe_server_cert_expiry_timestamp_seconds',
    'pxe_is_leader', 'pxe_sessions_held', 'pxe_connections_refused_total', 'pxe_tls_handshake_duration_seconds_bucket',
  ]
  for (const name of wanted) t.ok(used.has(name), `${name} is on the dashboard`)
  const rates = queries.filter((q) => /_total\b/.test(q.expr))
  for (const q of rates) t.match(q.expr, /rate\(/, `${q.panel}: a counter is shown as a rate`)
  t.ok(queries.some((q) => /histogram_quantile\(0\.99, sum by \(route, le\) \(rate\(pxe_request_duration_seconds_bucket/.test(q.expr)), 'request latency quantiles by route')
  for (const gauge of ['pxe_crl_next_update_timestamp_seconds', 'pxe_server_cert_expiry_timestamp_seconds']) {
    t.ok(queries.some((q) => new RegExp(`${gauge}\\{[^}]*\\} - time\\(\\)`).test(q.expr)), `${gauge} as time left`)
  }
})
