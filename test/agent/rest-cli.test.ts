// pxe-node --rest-proxy: the help, every bad value refused before anything starts (status 2), a port in
// use (status 1), and a real run: the compiled bin against a real controller with "rest" and the gateway
// emulator's REST side; the bot's requests through the proxy are served once the plan's share comes, the
// metrics show it, the token is never in the logs, and SIGTERM ends it all (status 0).
import t from 'tap'
import http from 'node:http'
import { spawn, spawnSync } from 'node:child_process'
import type { AddressInfo } from 'node:net'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { REST } from '@discordjs/rest'
import { issueBundle } from '../../pki/issue-certs.js'
import { main } from '../../src/agent/cli-main.js'
import { parseCliArgs } from '../../src/agent/cli-args.js'
import { makePki } from '../e2e/harness.js'
import { startGatewayEmulator } from '../support/gateway/index.js'
import { controllerIn, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const BIN = fileURLToPath(new URL('../../bin/pxe-node.js', import.meta.url))
if (!existsSync(fileURLToPath(new URL('../../dist/src/agent/cli.js', import.meta.url)))) throw new Error('dist/ is missing: run "npm run build" (npm test does it first)')
const root = testDir(t)
const pki = await makePki(root)
const { bundleDir } = await issueBundle(pki.dir, 'node-rest', 'node', { outDir: join(root, 'bundles') })
const base = ['--bundle', bundleDir, '--controller', 'https://127.0.0.1:1']

async function mainRun(args: string[]): Promise<{ status: number; stderr: string }> {
  let stderr = ''
  const status = await main([...args, '--log-level', 'silent'], { stdout: () => {}, stderr: (s) => (stderr += s) })
  return { status, stderr }
}

t.test('--help explains --rest-proxy and --rest-upstream', async (t) => {
  const res = spawnSync(process.execPath, [BIN, '--help'], { encoding: 'utf8', timeout: 30_000 })
  t.equal(res.status, 0)
  for (const text of ['--rest-proxy HOST:PORT', "new REST({ api: 'http://HOST:PORT/api' })", 'never logged', '--rest-upstream URL', '@discordjs/rest']) t.match(res.stdout, text, text)
})

t.test('the flags as parsed', async (t) => {
  t.same(parseCliArgs(base).restProxy, null, 'off by default')
  t.same(parseCliArgs([...base, '--rest-proxy', '127.0.0.1:8081']).restProxy, { listen: { host: '127.0.0.1', port: 8081 }, upstream: null })
  t.same(parseCliArgs([...base, '--rest-proxy', '[::1]:0', '--rest-upstream', 'http://127.0.0.1:9/api']).restProxy, { listen: { host: '::1', port: 0 }, upstream: 'http://127.0.0.1:9/api' })
  t.same(parseCliArgs([...base, '--rest-proxy', '0.0.0.0:8081']).restProxy?.listen, { host: '0.0.0.0', port: 8081 }, 'beyond loopback: allowed (the proxy warns)')
})

t.test('every bad --rest-proxy / --rest-upstream: a clear error, status 2, nothing started', async (t) => {
  const cases: [string[], RegExp][] = [
    [['--rest-proxy', '127.0.0.1'], /--rest-proxy "127\.0\.0\.1" is not HOST:PORT/],
    [['--rest-proxy', '8081'], /is not HOST:PORT/],
    [['--rest-proxy', ''], /is not HOST:PORT/],
    [['--rest-proxy', '127.0.0.1:65536'], /port must be an integer in 0\.\.65535/],
    [['--rest-proxy', '127.0.0.1:-5'], /port must be an integer in 0\.\.65535/],
    [['--rest-proxy', 'bad_host:80'], /not a host name or IP address/],
    [['--rest-upstream', 'https://discord.com/api'], /--rest-upstream needs --rest-proxy HOST:PORT/],
    [['--rest-proxy', '127.0.0.1:0', '--rest-upstream', 'http://discord.com/api'], /--rest-upstream "http:\/\/discord\.com\/api" may be plain http:\/\/ only on loopback/],
    [['--rest-proxy', '127.0.0.1:0', '--rest-upstream', 'nope'], /is not a URL/],
    [['--rest-proxy', '127.0.0.1:0', '--rest-upstream', ''], /--rest-upstream must not be empty/],
    [['--rest-proxy', '127.0.0.1:0', '--rest-proxy', '127.0.0.1:1'], /--rest-proxy is given more than once/],
  ]
  for (const [args, message] of cases) {
    const res = await mainRun([...base, ...args])
    t.equal(res.status, 2, args.join(' '))
    t.match(res.stderr, message)
    t.match(res.stderr, /Run "pxe-node --help" for usage/)
  }
})

t.test('a REST proxy port in use: a clear error, status 1, before any check-in', async (t) => {
  const taken = http.createServer()
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => taken.close(() => resolve())))
  const port = (taken.address() as AddressInfo).port
  const res = await mainRun([...base, '--rest-proxy', `127.0.0.1:${port}`])
  t.equal(res.status, 1)
  t.equal(res.stderr, `pxe-node: --rest-proxy: cannot listen on 127.0.0.1:${port} (EADDRINUSE)\n`)
})

t.test('a run: the share comes with the plan, the bot is served through the proxy, the token is never logged', async (t) => {
  const ctl = await controllerIn(pki, join(root, 'ctl'), { total_shards: 2, max_concurrency: 1, lease_seconds: 6, rest: { global_per_second: 50, safety: 0.9, invalid_per_10_minutes: 10_000 } })
  t.teardown(() => ctl.running.stop())
  const e = await startGatewayEmulator({ eventsPerSecond: 0 })
  t.teardown(() => e.stop())
  const child = spawn(process.execPath, [BIN, '--bundle', bundleDir, '--controller', urlOf(ctl.port), '--capacity', '2', '--rest-proxy', '127.0.0.1:0', '--rest-upstream', e.apiUrl, '--metrics-port', '0', '--log-level', 'debug'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)))
  t.teardown(() => child.kill('SIGKILL'))
  const logs = () => stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; url?: string; metrics_port?: number })
  await until('the proxy and the metrics listen', () => logs().some((l) => l.msg === 'REST proxy listening') && logs().some((l) => l.msg === 'metrics listener started'), 20_000)
  const url = logs().find((l) => l.msg === 'REST proxy listening')!.url!
  t.match(url, /^http:\/\/127\.0\.0\.1:\d+\/api$/, 'the log names the URL for the bot')
  const bot = new REST({ api: url }).setToken(e.token)
  t.match(await bot.get('/users/@me'), { id: String }, 'served (held until the plan gave a share)')
  for (let i = 0; i < 5; i++) await bot.get(`/channels/${300 + i}`)
  t.equal(e.restStats.global429, 0)
  const metricsPort = logs().find((l) => l.msg === 'metrics listener started')!.metrics_port!
  const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
  t.match(metrics, /pxe_rest_share_per_second [1-9]/, 'the share on the node\'s metrics')
  t.match(metrics, /pxe_rest_requests_total\{result="sent"\} [1-9]/)
  child.kill('SIGTERM')
  t.equal(await exited, 0, `exit status 0 after SIGTERM\n${stderr}`)
  t.notOk(stdout.includes(e.token), 'the token is in no log line')
  t.ok(logs().some((l) => l.msg.includes('REST share in force')), 'the share is logged (not the token)')
})
