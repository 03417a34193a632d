// deploy/prometheus/node-alerts.yml and the pxe-node scrape job: rules in the shape promtool checks,
// over metrics and label values the agent really exports, the alerts an operator of nodes needs, and
// a job that scrapes where pxe-node serves. With promtool on the machine, it checks both files too.
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml' // from tap's dependencies; the product does not use YAML
import { AgentMetrics } from '../../src/agent/agent-metrics.js'
import type { AgentStatus } from '../../src/agent/agent-status.js'

const dir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'deploy', 'prometheus')
const load = (file: string): any => parse(readFileSync(join(dir, file), 'utf8'), { strict: true, uniqueKeys: true })
const DURATION = /^(\d+(ms|s|m|h|d|w|y))+$/

/** Every pxe_node_* metric of an agent, with the label values it exports (read through a real scrape). */
async function exported(): Promise<Map<string, Set<string>>> {
  const status = { state: 'active', acceptedGeneration: 3, reportedGeneration: 3, assigned: [1, 2], lastRenewalAckAt: 1, authorityEndsAt: 2 } as unknown as AgentStatus
  const metrics = new AgentMetrics({ status: () => status, health: () => ({ ready_shards: 2, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 }) })
  const out = new Map<string, Set<string>>()
  for (const metric of await metrics.registry.getMetricsAsJSON()) {
    const values = new Set<string>()
    for (const v of metric.values) for (const [label, value] of Object.entries(v.labels)) values.add(`${label}=${value}`)
    out.set(metric.name, values)
  }
  return out
}

t.test('node-alerts.yml: well-formed rules over what the agent exports', async (t) => {
  const rules = load('node-alerts.yml')
  t.same(Object.keys(rules), ['groups'])
  t.same(rules.groups.map((g: any) => g.name), ['pxe-node'])
  const metrics = await exported()
  const controllerAlerts = new Set(load('alerts.yml').groups.flatMap((g: any) => g.rules.map((r: any) => r.alert)))
  const names: string[] = []
  for (const rule of rules.groups[0].rules) {
    names.push(rule.alert)
    t.same(Object.keys(rule).sort(), ['alert', 'annotations', 'expr', 'for', 'labels'], `${rule.alert}: the keys of an alerting rule`)
    t.match(rule.alert, /^PxeNode[A-Z][A-Za-z0-9]+$/)
    t.notOk(controllerAlerts.has(rule.alert), `${rule.alert}: not a name alerts.yml uses`)
    t.match(rule.for, DURATION, `${rule.alert}: for`)
    t.match(rule.labels, { severity: /^(warning|critical)$/ })
    t.type(rule.annotations.summary, 'string')
    t.type(rule.annotations.description, 'string')
    const expr = rule.expr as string
    let depth = 0
    for (const ch of expr) {
      depth += ch === '(' ? 1 : ch === ')' ? -1 : 0
      if (depth < 0) break
    }
    t.equal(depth, 0, `${rule.alert}: balanced parentheses`)
    for (const m of expr.matchAll(/\b(pxe_[a-z_]+)(\{([^}]*)\})?/g)) {
      const name = m[1]!.replace(/_(bucket|count|sum)$/, '')
      t.ok(metrics.has(name), `${rule.alert}: ${m[1]} is an agent metric`)
      for (const matcher of (m[3] ?? '').split(',').filter(Boolean)) {
        const [label, value] = matcher.split('=').map((s) => s.trim().replace(/^"|"$/g, ''))
        t.ok(metrics.get(name)?.has(`${label}=${value}`), `${rule.alert}: ${m[1]} has ${label}="${value}"`)
      }
    }
  }
  t.equal(new Set(names).size, names.length, 'alert names are unique')
  const byName = new Map(rules.groups[0].rules.map((r: any) => [r.alert, r]))
  for (const name of ['PxeNodeDown', 'PxeNodeFailSafeApproaching', 'PxeNodeNoAuthority', 'PxeNodeCheckinsFailing', 'PxeNodePlansRefused', 'PxeNodeShardsFailed', 'PxeNodeShardsNotRunning']) {
    t.ok(byName.has(name), `${name} is there`)
  }
  const expr = (name: string) => (byName.get(name) as any).expr as string
  t.match(expr('PxeNodeDown'), /up\{job="pxe-node"\} == 0/)
  t.match(expr('PxeNodeFailSafeApproaching'), /time\(\) - pxe_node_last_renewal_timestamp_seconds/)
  t.match(expr('PxeNodeNoAuthority'), /pxe_node_agent_state\{state="no_authority"\} == 1/)
  t.match(expr('PxeNodePlansRefused'), /increase\(pxe_node_plans_refused_total\[10m\]\)/)
  t.match(expr('PxeNodeShardsFailed'), /pxe_node_shards\{state="fatal"\} > 0/)
  t.match(expr('PxeNodeShardsNotRunning'), /pxe_node_shards_assigned - ignoring \(state\) pxe_node_shards\{state="ready"\}/)
  t.match(byName.get('PxeNodeNoAuthority'), { labels: { severity: 'critical' } })
})

t.test('prometheus.yml scrapes the node agents and loads their rules', async (t) => {
  const config = load('prometheus.yml')
  t.ok(config.rule_files.includes('node-alerts.yml'))
  const job = config.scrape_configs.find((j: any) => j.job_name === 'pxe-node')
  t.match(job, { metrics_path: '/metrics', scheme: 'http' }, 'pxe-node serves GET /metrics over plain HTTP')
  for (const key of ['scrape_interval', 'scrape_timeout']) t.match(job[key], DURATION, key)
  t.same(Object.keys(job.file_sd_configs[0]).sort(), ['files', 'refresh_interval'])
  t.same(job.file_sd_configs[0].files, ['pxe-nodes/*.json'], 'targets from files the operator writes (a glob only in the last element)')
  t.notOk(job.static_configs, 'no example targets that would page for hosts that do not exist')
  // The comment's example targets file is valid file_sd JSON.
  const example = /#\s+(\[\{"targets".*\}\])\n/.exec(readFileSync(join(dir, 'prometheus.yml'), 'utf8'))
  const targets = JSON.parse(example![1]!) as { targets: string[]; labels: Record<string, string> }[]
  t.match(targets[0]!.targets[0], /^[\d.]+:9465$/, 'host:port, the port the pxe-node unit example listens on')
})

const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' })
t.test('promtool accepts the files', { skip: promtool.status === 0 ? false : 'promtool is not installed' }, async (t) => {
  for (const args of [['check', 'rules', 'alerts.yml', 'node-alerts.yml'], ['check', 'config', 'prometheus.yml']]) {
    const res = spawnSync('promtool', args, { cwd: dir, encoding: 'utf8', timeout: 30_000 })
    t.equal(res.status, 0, `promtool ${args.join(' ')}: ${res.stdout}${res.stderr}`)
  }
})
