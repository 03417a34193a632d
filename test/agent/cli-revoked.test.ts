// pxe-node as a process (the compiled bin, built by `npm test`) whose certificate is revoked with the
// operator toolkit while it runs against a real controller: every shard is stopped through --on-stop
// (PXE_STOP_REASON=certificate_refused), long before the lease would end, and the process exits 3, as
// --help says, with the reason on stderr and in the log.
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { issueBundle } from '../../pki/issue-certs.js'
import { revoke } from '../../pki/revocation.js'
import { bundle, makePki, request } from '../e2e/harness.js'
import { controllerIn, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const BIN = fileURLToPath(new URL('../../bin/pxe-node.js', import.meta.url))
if (!existsSync(fileURLToPath(new URL('../../dist/src/agent/cli.js', import.meta.url)))) throw new Error('dist/ is missing: run "npm run build" (npm test does it first)')

const root = testDir(t)
const pki = await makePki(root)
const { bundleDir } = await issueBundle(pki.dir, 'node-revoked', 'node', { outDir: join(root, 'bundles') })
const op = await bundle(pki, 'ops', 'operator')

t.test('--help says what a refused certificate does: every shard stopped, exit 3 only when every controller refuses', async (t) => {
  const res = spawnSync(process.execPath, [BIN, '--help'], { encoding: 'utf8', timeout: 30_000 })
  t.equal(res.status, 0)
  const help = res.stdout.replace(/\s+/g, ' ')
  t.match(help, 'when every controller URL refuses it on new connections, twice in a row')
  t.match(help, 'the agent stops every shard at once and exits 3')
  t.match(help, 'A refusal by some controllers only')
  t.match(help, '3 every controller refused this node\'s certificate, as above (every shard was stopped first; the reason on stderr)')
})

t.test('a revoked certificate: every shard stopped, then exit status 3', async (t) => {
  // lease 30 s: check-ins every ~10 s, the fail-safe 10 s before the lease ends
  const ctl = await controllerIn(pki, join(root, 'c0'), { total_shards: 8, max_concurrency: 8, lease_seconds: 30, identify_interval_ms: 5000 })
  t.teardown(() => ctl.running.stop())
  const started = join(root, 'started.txt')
  const stopped = join(root, 'stopped.txt')
  const child = spawn(process.execPath, [
    BIN, '--bundle', bundleDir, '--controller', urlOf(ctl.port), '--capacity', '3', '--log-level', 'debug',
    '--on-start', `echo "$PXE_SHARD_ID" >> '${started}'`,
    '--on-stop', `echo "$PXE_SHARD_ID $PXE_STOP_REASON" >> '${stopped}'`,
  ], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  let exitedAt = 0
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => ((exitedAt = performance.now()), resolve(code ?? signal ?? -1))))
  t.teardown(() => child.kill('SIGKILL'))
  const lines = (path: string) => (existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n').sort() : [])
  await until('3 shards started', () => lines(started).length === 3, 20_000)
  const revokedAt = performance.now()
  await revoke(pki.dir, { name: 'node-revoked' })
  // once the controller has loaded the CRL (the node leaves the plan at once)
  for (;;) {
    const plan = await request(ctl.port, pki.ca, op, '/v1/plan')
    if (!plan.json.nodes.some((n: { node_id: string }) => n.node_id === 'node-revoked')) break
    await new Promise((r) => setTimeout(r, 50))
  }
  // The next regular check-in (at most ~11 s away) is refused twice on new connections: definitive.
  const code = await Promise.race([exited, new Promise<string>((resolve) => setTimeout(() => resolve('still running 20 s after the revocation'), 20_000).unref())])
  t.equal(code, 3, `exit status 3\n${stderr}`)
  if (exitedAt > 0) t.comment(`exited ${Math.round(exitedAt - revokedAt)} ms after the revocation`)
  t.same(lines(stopped), ['0 certificate_refused', '1 certificate_refused', '2 certificate_refused'], 'every shard was stopped first')
  t.match(stderr, /^pxe-node: every controller refused this node's certificate/, 'the reason on stderr')
  const logs = stdout.trim().split('\n').map((l) => JSON.parse(l) as { level: number; event?: string; definitive?: boolean })
  const refusals = logs.filter((l) => l.event === 'certificate_refused')
  t.same(refusals.map((l) => [l.definitive, l.level]), [[true, 50]], 'one definitive refusal, logged at error')
  t.ok(logs.some((l) => l.event === 'halted' && l.level === 50), 'the halt logged')
})
