// pxe-node --metrics-port (the compiled bin, built by `npm test`): the flags' checks, a port in use, and a
// real run against a controller over mTLS whose /metrics shows the plan, the shards running and the
// renewals, answers 404 to everything else and ends with the process.
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { issueBundle } from '../../pki/issue-certs.js'
import { parseCliArgs } from '../../src/agent/cli-args.js'
import { main } from '../../src/agent/cli-main.js'
import { makePki } from '../e2e/harness.js'
import { controllerIn, until, urlOf } from './support.js'
import { sample } from './metrics-text.js'
import { testDir } from '../support/test-dir.js'

const BIN = fileURLToPath(new URL('../../bin/pxe-node.js', import.meta.url))
if (!existsSync(fileURLToPath(new URL('../../dist/src/agent/cli.js', import.meta.url)))) throw new Error('dist/ is missing: run "npm run build" (npm test does it first)')

const root = testDir(t)
const pki = await makePki(root)
const { bundleDir } = await issueBundle(pki.dir, 'node-metrics', 'node', { outDir: join(root, 'bundles') })
const base = ['--bundle', bundleDir, '--controller', 'https://127.0.0.1:1']

/** Runs main in-process (silent logs: stdout is tap's); resolves with the status and stderr. */
async function mainRun(args: string[]): Promise<{ status: number; stderr: string; stdout: string }> {
  let stderr = ''
  let stdout = ''
  const status = await main([...args, '--log-level', 'silent'], { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s) })
  return { status, stderr, stdout }
}

/** One plain HTTP request; resolves with the status, content type and body. */
function get(port: number, path: string, opts: { method?: string; body?: string } = {}): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    const headers = opts.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(opts.body)) }
    const req = http.request({ host: '127.0.0.1', port, path, method: opts.method ?? 'GET', headers, agent: false }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }))
    })
    req.on('error', reject)
    if (opts.body !== undefined) req.write(opts.body)
    req.end()
  })
}

/** Scrapes every 50 ms until `check` holds for the text; resolves with that text. */
async function scrapeUntil(port: number, what: string, check: (text: string) => boolean, timeoutMs = 20_000): Promise<string> {
  const end = performance.now() + timeoutMs
  let text = ''
  while (performance.now() < end) {
    text = (await get(port, '/metrics')).body
    if (check(text)) return text
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}\n${text}`)
}

t.test('--help explains the metrics flags', async (t) => {
  const res = spawnSync(process.execPath, [BIN, '--help'], { encoding: 'utf8', timeout: 30_000 })
  t.equal(res.status, 0)
  for (const text of ['--metrics-port P', '--metrics-host H', '--metrics-allow-remote', 'GET /metrics', '404', 'loopback', 'default 127.0.0.1', 'metrics listener started']) t.match(res.stdout, text, text)
})

t.test('a non-loopback --metrics-host without --metrics-allow-remote is a usage error (exit 2), from the bin too', async (t) => {
  const res = spawnSync(process.execPath, [BIN, ...base, '--metrics-port', '9465', '--metrics-host', '0.0.0.0'], { encoding: 'utf8', timeout: 30_000 })
  t.equal(res.status, 2)
  t.match(res.stderr, /^pxe-node: --metrics-host "0\.0\.0\.0" is not a loopback address; .* needs --metrics-allow-remote/)
  t.match(res.stderr, /pxe-node --help/)
  t.equal(res.stdout, '', 'nothing started, nothing logged')
})

t.test('bad metrics flags: a clear error and status 2 (main in-process)', async (t) => {
  const cases: [string, string[], RegExp][] = [
    ['a public address', ['--metrics-port', '9465', '--metrics-host', '10.1.2.3'], /--metrics-host "10\.1\.2\.3" is not a loopback address/],
    ['all IPv6 addresses', ['--metrics-port', '9465', '--metrics-host', '::'], /--metrics-host "::" is not a loopback address/],
    ['a port out of range', ['--metrics-port', '65536'], /--metrics-port must be an integer in 0\.\.65535/],
    ['a port that is no number', ['--metrics-port', 'http'], /--metrics-port must be an integer/],
    ['a host without a port', ['--metrics-host', '127.0.0.1'], /--metrics-host needs --metrics-port/],
    ['allow-remote without a port', ['--metrics-allow-remote'], /--metrics-allow-remote needs --metrics-port/],
    ['an empty host', ['--metrics-port', '9465', '--metrics-host', ' '], /--metrics-host must not be empty/],
    ['the port twice', ['--metrics-port', '9465', '--metrics-port', '9466'], /--metrics-port is given more than once/],
  ]
  for (const [what, args, message] of cases) {
    const res = await mainRun([...base, ...args])
    t.equal(res.status, 2, `${what}: exit status 2`)
    t.match(res.stderr, message, `${what}: ${res.stderr.split('\n')[0]}`)
  }
})

t.test('the listener address: loopback by default, any host with --metrics-allow-remote, none without --metrics-port', async (t) => {
  t.same(parseCliArgs([...base, '--metrics-port', '0']).metrics, { host: '127.0.0.1', port: 0 })
  t.same(parseCliArgs([...base, '--metrics-port', '9465', '--metrics-host', '::1']).metrics, { host: '::1', port: 9465 })
  t.same(parseCliArgs([...base, '--metrics-port', '9465', '--metrics-host', '0.0.0.0', '--metrics-allow-remote']).metrics, { host: '0.0.0.0', port: 9465 })
  t.equal(parseCliArgs(base).metrics, null)
})

t.test('a metrics port in use: a clear error naming it, exit status 1, before any check-in', async (t) => {
  const taken = http.createServer()
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => taken.close(() => resolve())))
  const port = (taken.address() as AddressInfo).port
  const res = await mainRun([...base, '--metrics-port', String(port)])
  t.equal(res.status, 1)
  t.equal(res.stderr, `pxe-node: --metrics-port: cannot listen on 127.0.0.1:${port} (EADDRINUSE: the port is already in use)\n`)
})

t.test('a run with --metrics-port 0: /metrics shows the plan, the shards running and each renewal; 404 elsewhere', async (t) => {
  const ctl = await controllerIn(pki, join(root, 'c0'), { total_shards: 8, max_concurrency: 8, lease_seconds: 6, identify_interval_ms: 5000 })
  t.teardown(() => ctl.running.stop())
  const child = spawn(process.execPath, [
    BIN, '--bundle', bundleDir, '--controller', urlOf(ctl.port), '--capacity', '3', '--metrics-port', '0', '--on-start', 'true',
  ], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)))
  t.teardown(() => child.kill('SIGKILL'))
  const logs = () => stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; metrics_host?: string; metrics_port?: number })
  await until('the metrics listener is started', () => logs().some((l) => l.msg === 'metrics listener started'), 20_000)
  const started = logs().find((l) => l.msg === 'metrics listener started')!
  t.equal(started.metrics_host, '127.0.0.1', 'loopback by default')
  const port = started.metrics_port!
  t.ok(port > 0, `the log names the port chosen (${port})`)

  await scrapeUntil(port, '3 shards running', (text) => sample(text, 'pxe_node_shards{state="ready"}') === 3)
  const first = await get(port, '/metrics')
  t.equal(first.status, 200)
  t.match(first.type, /^text\/plain; version=0\.0\.4/, 'Prometheus text')
  const text = first.body
  t.equal(sample(text, 'pxe_node_plan_generation'), 1, 'the accepted generation')
  t.equal(sample(text, 'pxe_node_shards_assigned'), 3)
  t.equal(sample(text, 'pxe_node_shards{state="ready"}'), 3, 'the shards running')
  t.equal(sample(text, 'pxe_node_agent_state{state="active"}'), 1)
  const renewal = sample(text, 'pxe_node_last_renewal_timestamp_seconds')!
  t.ok(Math.abs(renewal - Date.now() / 1000) < 30, `the last renewal is recent (${renewal})`)
  t.ok(sample(text, 'pxe_node_authority_expiry_timestamp_seconds')! > renewal, 'authority ends after the renewal')
  t.equal(sample(text, 'pxe_node_identify_claims_total{result="granted"}'), 3)
  t.equal(sample(text, 'pxe_node_identify_wait_seconds_count{mode="identify"}'), 3)
  t.ok(sample(text, 'process_cpu_user_seconds_total') !== undefined, 'pxe-node adds the process metrics')
  const accepted = sample(text, 'pxe_node_checkins_total{result="accepted"}')!

  // The lease is 6 s, so the agent checks in every ~2 s: the next renewal moves the gauge on (by more than
  // the millisecond or so a monotonic time read as wall-clock time may differ between two scrapes).
  const next = await scrapeUntil(port, 'the next renewal', (text) => sample(text, 'pxe_node_last_renewal_timestamp_seconds')! > renewal + 1)
  t.ok(sample(next, 'pxe_node_checkins_total{result="accepted"}')! > accepted, 'the check-in is counted')

  for (const [path, method] of [['/', 'GET'], ['/metrics/', 'GET'], ['/metricsx', 'GET'], ['/healthz', 'GET'], ['/metrics', 'POST'], ['/metrics', 'HEAD']] as const) {
    const res = await get(port, path, { method })
    t.equal(res.status, 404, `${method} ${path}: 404`)
  }
  const withBody = await get(port, '/metrics', { body: 'x'.repeat(100) })
  t.equal(withBody.status, 413, 'a GET with a body is refused unread')
  t.same((await get(port, '/metrics?name[]=x')).status, 200, 'a query string is ignored')

  child.kill('SIGTERM')
  t.equal(await exited, 0, `exit status 0 after SIGTERM\n${stderr}`)
  await t.rejects(get(port, '/metrics'), { code: 'ECONNREFUSED' }, 'the listener ended with the process')
  t.equal(stderr, '')
})
