// deploy/prometheus/: the scrape config and the alert rules are YAML in the shape promtool checks, every
// metric an alert uses is one the controller registers, and the alerts the issue asks for are there.
// (promtool itself is not available here; this checks the structure and the names.)
import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml' // from tap's dependencies; the product does not use YAML
import { ControllerMetrics } from '../../src/ops/metrics.js'

const dir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'deploy', 'prometheus')
const load = (file: string): any => parse(readFileSync(join(dir, file), 'utf8'), { strict: true, uniqueKeys: true })
const DURATION = /^(\d+(ms|s|m|h|d|w|y))+$/

t.test('prometheus.yml scrapes the ops endpoint and loads the rules', async (t) => {
  const config = load('prometheus.yml')
  t.same(Object.keys(config).sort(), ['global', 'rule_files', 'scrape_configs'])
  t.same(config.rule_files, ['alerts.yml', 'node-alerts.yml'])
  for (const file of config.rule_files) t.ok(existsSync(join(dir, file)), file)
  // The node agents' job is checked with their rules (test/deploy/node-prometheus.test.ts).
  t.same(config.scrape_configs.map((j: any) => j.job_name), ['pxe-controller', 'pxe-node'])
  const [job] = config.scrape_configs
  t.match(job, { job_name: 'pxe-controller', metrics_path: '/metrics', scheme: 'http' })
  t.same(job.static_configs[0].targets, ['127.0.0.1:9464'], 'the SPEC default of the ops listener')
  for (const key of ['scrape_interval', 'scrape_timeout']) t.match(job[key], DURATION, key)
})

t.test('alerts.yml: well-formed rules over metrics the controller exports', async (t) => {
  const rules = load('alerts.yml')
  t.same(Object.keys(rules), ['groups'])
  const exported = new Set((await new ControllerMetrics({ totalShards: 64, dailyIdentifyLimit: 1000, rest: { globalPerSecond: 50, safety: 0.9, invalidPer10Minutes: 10_000 } }).registry.getMetricsAsJSON()).map((m) => m.name))
  const names: string[] = []
  for (const group of rules.groups) {
    t.type(group.name, 'string')
    for (const rule of group.rules) {
      names.push(rule.alert)
      t.same(Object.keys(rule).sort(), ['alert', 'annotations', 'expr', 'for', 'labels'], `${rule.alert}: the keys of an alerting rule`)
      t.match(rule.alert, /^[A-Z][A-Za-z0-9]+$/)
      t.match(rule.for, DURATION, `${rule.alert}: for`)
      t.match(rule.labels, { severity: /^(warning|critical)$/ })
      t.type(rule.annotations.summary, 'string')
      t.type(rule.annotations.description, 'string')
      let depth = 0
      for (const ch of rule.expr as string) {
        depth += ch === '(' ? 1 : ch === ')' ? -1 : 0
        if (depth < 0) break
      }
      t.equal(depth, 0, `${rule.alert}: balanced parentheses`)
      for (const metric of (rule.expr as string).match(/\bpxe_[a-z_]+/g) ?? []) {
        t.ok(exported.has(metric.replace(/_(bucket|count|sum)$/, '')), `${rule.alert}: ${metric} is exported`)
      }
    }
  }
  t.equal(new Set(names).size, names.length, 'alert names are unique')
  const expr = (name: string) => rules.groups.flatMap((g: any) => g.rules).find((r: any) => r.alert === name)?.expr ?? ''
  t.match(expr('PxeCrlNextUpdateWithinADay'), /pxe_crl_next_update_timestamp_seconds - time\(\) < 86400/)
  t.match(expr('PxeServerCertificateExpiresWithin14Days'), /pxe_server_cert_expiry_timestamp_seconds - time\(\) < 14 \* 86400/)
  t.match(expr('PxeShardsUnassigned'), /pxe_shards_unassigned > 0/)
  t.equal(rules.groups[0].rules.find((r: any) => r.alert === 'PxeShardsUnassigned').for, '2m')
  t.match(expr('PxeIdentifyDailyBudgetLow'), /pxe_identify_daily_budget_remaining \/ pxe_identify_daily_budget_limit < 0\.10/)
  t.match(expr('PxeTlsHandshakeFailuresRising'), /rate\(pxe_tls_handshake_failures_total\[5m\]\)/)
  t.match(expr('PxeControllerNotReady'), /pxe_ready == 0/)
})
