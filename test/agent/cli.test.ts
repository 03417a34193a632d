// pxe-node as a process (the compiled bin, built by `npm test`): help, refused command lines, an
// unusable bundle, and a real run that starts shards through --on-start and stops them on SIGTERM.
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { issueBundle } from '../../pki/issue-certs.js'
import { main } from '../../src/agent/cli-main.js'
import { bundle, makePki, request } from '../e2e/harness.js'
import { controllerIn, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const BIN = fileURLToPath(new URL('../../bin/pxe-node.js', import.meta.url))
const run = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 30_000 })
if (!existsSync(fileURLToPath(new URL('../../dist/src/agent/cli.js', import.meta.url)))) throw new Error('dist/ is missing: run "npm run build" (npm test does it first)')

const root = testDir(t)
const pki = await makePki(root)
const { bundleDir } = await issueBundle(pki.dir, 'node-cli', 'node', { outDir: join(root, 'bundles') })

t.test('--help explains the flags, the environment and the exit statuses', async (t) => {
  const res = run('--help')
  t.equal(res.status, 0)
  for (const text of ['Usage: pxe-node --bundle DIR --controller URL', '--capacity', '--state-file', '--on-start', '--on-stop', '--stop-timeout-ms', '--clock-skew-ms', '--log-level', 'PXE_SHARD_ID', 'reshard', 'SIGTERM', 'Exit status', 'PXE_START_MODE', 'PXE_RESUME_SESSION_ID', 'PXE_RESUME_SEQUENCE', 'PXE_RESUME_URL', 'exits 75', 'LAST line on stdout', '"session_id"']) {
    t.match(res.stdout, text, text)
  }
  t.equal(res.stderr, '')
})

t.test('a bad flag: a clear error on stderr, exit status 2', async (t) => {
  const res = run('--bundle', bundleDir, '--controller', 'https://127.0.0.1:1', '--nope')
  t.equal(res.status, 2)
  t.match(res.stderr, /^pxe-node: unknown option --nope(; did you mean --name\?)?\n/)
  t.match(res.stderr, /Run "pxe-node --help" for usage/)
  t.equal(res.stdout, '')
})

t.test('every bad command line gets a clear error and status 2 (main in-process: it stops before any effect)', async (t) => {
  const url = 'https://127.0.0.1:1'
  const cases: [string, string[], RegExp][] = [
    ['unknown flag', ['--bundle', bundleDir, '--controller', url, '--nope'], /unknown option --nope/],
    ['a mistyped flag', ['--bundle', bundleDir, '--controller', url, '--capcity', '2'], /unknown option --capcity; did you mean --capacity\?/],
    ['a flag without its value', ['--bundle', bundleDir, '--controller'], /option --controller needs a value/],
    ['a value for a switch', ['--bundle', bundleDir, '--controller', url, '--metrics-allow-remote=yes'], /option --metrics-allow-remote takes no value/],
    ['missing --bundle', ['--controller', url], /--bundle DIR is required/],
    ['missing --controller', ['--bundle', bundleDir], /--controller URL\[,URL\.\.\.\] is required/],
    ['capacity 0', ['--bundle', bundleDir, '--controller', url, '--capacity', '0'], /--capacity must be an integer in 1\.\.128/],
    ['capacity 1.5', ['--bundle', bundleDir, '--controller', url, '--capacity', '1.5'], /--capacity must be an integer/],
    ['plain http', ['--bundle', bundleDir, '--controller', 'http://127.0.0.1:8443'], /must use https/],
    ['a URL with a path', ['--bundle', bundleDir, '--controller', `${url}/v1`], /without a path/],
    ['a URL twice', ['--bundle', bundleDir, '--controller', `${url},${url}`], /listed twice/],
    ['bad log level', ['--bundle', bundleDir, '--controller', url, '--log-level', 'loud'], /--log-level must be one of/],
    ['skew too large', ['--bundle', bundleDir, '--controller', url, '--clock-skew-ms', '3600000'], /--clock-skew-ms must be an integer in 0\.\.60000/],
    ['a flag twice', ['--bundle', bundleDir, '--controller', url, '--capacity', '2', '--capacity', '3'], /--capacity is given more than once/],
    ['a stray argument', ['--bundle', bundleDir, '--controller', url, 'extra'], /unexpected argument "extra"/],
    ['stop timeout 0', ['--bundle', bundleDir, '--controller', url, '--stop-timeout-ms', '0'], /--stop-timeout-ms must be an integer in 100\.\.600000/],
    ['stop timeout 2.5', ['--bundle', bundleDir, '--controller', url, '--stop-timeout-ms', '2.5'], /--stop-timeout-ms must be an integer/],
  ]
  for (const [what, args, message] of cases) {
    let stdout = ''
    let stderr = ''
    const status = await main(args, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s) })
    t.equal(status, 2, `${what}: exit status 2`)
    t.match(stderr, message, `${what}: ${stderr.split('\n')[0]}`)
    t.match(stderr, /pxe-node --help/, `${what}: points to --help`)
    t.equal(stdout, '', `${what}: nothing on stdout`)
  }
})

t.test('a missing bundle: a clear error and exit status 1', async (t) => {
  const missing = run('--bundle', join(root, 'no-such-bundle'), '--controller', 'https://127.0.0.1:1')
  t.equal(missing.status, 1)
  t.match(missing.stderr, /cannot use bundle .*no-such-bundle: cannot read .*key\.pem \(ENOENT\)/)
  t.notMatch(missing.stderr, /PRIVATE KEY/, 'no key material in the error')
})

t.test('a damaged state file: a clear error and exit status 1, the file left as it is (main in-process)', async (t) => {
  const stateFile = join(root, 'damaged-state.json')
  writeFileSync(stateFile, '{"version":1,"node_id":"node-cli","generation":')
  let stderr = ''
  const status = await main(['--bundle', bundleDir, '--controller', 'https://127.0.0.1:1', '--state-file', stateFile, '--log-level', 'silent'], { stdout: () => undefined, stderr: (s) => (stderr += s) })
  t.equal(status, 1)
  t.match(stderr, /state file .*damaged-state\.json is not JSON/)
  t.equal(readFileSync(stateFile, 'utf8'), '{"version":1,"node_id":"node-cli","generation":')
})

t.test('a run: shards started by --on-start with the shard in the environment, stopped on SIGTERM (the node leaves), exit 0', async (t) => {
  const ctl = await controllerIn(pki, join(root, 'c0'), { total_shards: 8, max_concurrency: 8, lease_seconds: 6, identify_interval_ms: 5000 })
  t.teardown(() => ctl.running.stop())
  const started = join(root, 'started.txt')
  const stopped = join(root, 'stopped.txt')
  const stateFile = join(root, 'node-state', 'state.json')
  const child = spawn(process.execPath, [
    BIN, '--bundle', bundleDir, '--controller', urlOf(ctl.port), '--capacity', '3', '--state-file', stateFile, '--log-level', 'debug',
    '--on-start', `echo "$PXE_EVENT $PXE_SHARD_ID $PXE_NODE_ID $PXE_GENERATION $PXE_TOTAL_SHARDS $PXE_SHARD_SET" >> '${started}'`,
    '--on-stop', `echo "$PXE_EVENT $PXE_SHARD_ID $PXE_STOP_REASON" >> '${stopped}'`,
  ], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)))
  t.teardown(() => child.kill('SIGKILL'))
  const lines = (path: string) => (existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n').sort() : [])
  await until('3 shards started', () => lines(started).length === 3, 20_000)
  t.same(lines(started), ['start 0 node-cli 1 8 current', 'start 1 node-cli 1 8 current', 'start 2 node-cli 1 8 current'])
  // a live reshard: the next set's shards start beside the current ones, under their own count
  const op = await bundle(pki, 'ops-cli', 'operator')
  const reshard = await request(ctl.port, pki.ca, op, '/v1/reshard', { body: { total_shards: 16 } })
  t.equal(reshard.status, 202, reshard.text)
  await until('3 next-set shards started', () => lines(started).length === 6, 30_000)
  t.same(lines(started).filter((l) => l.endsWith(' next')), ['start 0 node-cli 2 16 next', 'start 1 node-cli 2 16 next', 'start 2 node-cli 2 16 next'])
  child.kill('SIGTERM')
  t.equal(await exited, 0, `exit status 0 after SIGTERM\n${stderr}`)
  t.same(lines(stopped), ['stop 0 leave', 'stop 0 leave', 'stop 1 leave', 'stop 1 leave', 'stop 2 leave', 'stop 2 leave'], 'every shard of both sets stopped (the node leaves) before the exit')
  const state = JSON.parse(readFileSync(stateFile, 'utf8'))
  t.equal(state.generation, 2, 'the accepted generation (of the reshard) was stored')
  t.equal(statSync(stateFile).mode & 0o777, 0o600, 'the state file is 0600')
  const logs = stdout.trim().split('\n').map((l) => JSON.parse(l) as { msg: string; level: number })
  t.ok(logs.some((l) => l.msg === 'shard started'), 'JSON logs on stdout')
  t.ok(logs.some((l) => l.msg.startsWith('signal received: leaving')))
  t.equal(stderr, '')
})

t.test('a stop timeout that does not fit the lease: a clear message at the first plan, nothing started, exit 4', async (t) => {
  const ctl = await controllerIn(pki, join(root, 'c-fit'), { total_shards: 8, max_concurrency: 8, lease_seconds: 6, identify_interval_ms: 5000 })
  t.teardown(() => ctl.running.stop())
  const started = join(root, 'started-fit.txt')
  const child = spawn(process.execPath, [
    BIN, '--bundle', bundleDir, '--controller', urlOf(ctl.port), '--capacity', '2', '--stop-timeout-ms', '5000',
    '--on-start', `echo "$PXE_SHARD_ID" >> '${started}'`,
  ], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  t.teardown(() => child.kill('SIGKILL'))
  const code = await new Promise<number | string>((resolve) => child.once('exit', (c, s) => resolve(c ?? s ?? -1)))
  t.equal(code, 4, 'exit status 4')
  t.match(stderr, /pxe-node: the stop timeout \(5000 ms\) and the stop margin \(1000 ms\) do not fit the controller's lease of 6 s/)
  t.match(stderr, /Lower the stop timeout to at most 2000 ms or raise the controller's lease_seconds/)
  t.notOk(existsSync(started), 'no shard was started')
})
