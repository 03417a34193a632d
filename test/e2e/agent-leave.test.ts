// pxe-node leaving on SIGTERM (SPEC "Leaving on purpose"), the compiled bin against a real controller
// over mTLS with certificates made at run time. The first signal stops every shard (PXE_STOP_REASON=leave,
// the stop command's session deposited), tells the controller (node_left at once, not a lease later) and
// exits 0: the other node's claims for the moved shards are granted at once, as resumes. A second signal
// during a slow stop kills the stop command and exits at once, without a leave.
import t, { type Test } from 'tap'
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { issueBundle } from '../../pki/issue-certs.js'
import { bundle, checkinBody, makePki, request, type Identity } from './harness.js'
import { controllerIn, until, urlOf } from '../agent/support.js'
import { testDir } from '../support/test-dir.js'

const BIN = fileURLToPath(new URL('../../bin/pxe-node.js', import.meta.url))
if (!existsSync(fileURLToPath(new URL('../../dist/src/agent/cli.js', import.meta.url)))) throw new Error('dist/ is missing: run "npm run build" (npm test does it first)')

const root = testDir(t)
const pki = await makePki(root)
const a = await issueBundle(pki.dir, 'node-a', 'node', { outDir: join(root, 'bundles') })
const [b, op] = await Promise.all([bundle(pki, 'node-b', 'node'), bundle(pki, 'ops', 'operator')])
const GATEWAY = 'ws://127.0.0.1:4567'
// A lease long enough that a move after its expiry could not pass for one after a leave.
const SETTINGS = { total_shards: 4, max_concurrency: 4, lease_seconds: 30, identify_interval_ms: 5000, session_handoff: { allowed_hosts: ['127.0.0.1'], ttl_seconds: 60 } }

interface AuditLine {
  readonly event: string
  readonly node_id?: string
  readonly shard_id?: number
}
const audit = (dir: string) => readFileSync(join(dir, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as AuditLine)
const marksIn = (path: string) => () => (existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n') : [])

function pxeNode(t: Test, port: number, extra: string[], onStart: string, onStop: string) {
  const args = [BIN, '--bundle', a.bundleDir, '--controller', urlOf(port), '--capacity', '4', '--log-level', 'debug', ...extra, '--on-start', onStart, '--on-stop', onStop]
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (d: Buffer) => (out += d.toString()))
  child.stderr.on('data', (d: Buffer) => (out += d.toString()))
  let code: number | string | null = null
  const exited = new Promise<number | string>((resolve) => child.once('exit', (c, s) => resolve((code = c ?? s ?? -1))))
  t.teardown(() => child.kill('SIGKILL'))
  return { child, exited, exitCode: () => code, output: () => out }
}

const call = (port: number, id: Identity, path: string, body?: unknown) => request(port, pki.ca, id, path, body === undefined ? {} : { body })
const liveNodes = async (port: number) => ((await call(port, op, '/v1/plan')).json as { nodes: { node_id: string }[] }).nodes.map((n) => n.node_id)

t.test('SIGTERM: every shard stopped, the sessions deposited, node_left at once, the moved shards resumed elsewhere, exit 0', async (t) => {
  const dir = join(root, 'leave')
  const ctl = await controllerIn(pki, dir, SETTINGS)
  t.teardown(() => ctl.running.stop())
  const marks = join(root, 'leave-marks.txt')
  const lines = marksIn(marks)
  const onStart = `echo "start $PXE_SHARD_ID" >> '${marks}'`
  const onStop = `echo "stop $PXE_SHARD_ID $PXE_STOP_REASON" >> '${marks}'; printf '{"session_id":"SeSsIoNx%s","sequence":%s,"resume_url":"${GATEWAY}"}\\n' "$PXE_SHARD_ID" "47$PXE_SHARD_ID"`
  const node = pxeNode(t, ctl.port, [], onStart, onStop)
  await until('node-a started its 4 shards', () => lines().filter((l) => l.startsWith('start')).length === 4, 20_000)
  // node-b joins: node-a gives 2 and 3 away by plan first (its release check-in goes at once)
  const joined = await call(ctl.port, b, '/v1/checkin', checkinBody('node-b', { capacity: 4 }))
  t.equal(joined.status, 200)
  await until('node-a stopped 2 and 3 by plan', () => lines().filter((l) => l.endsWith(' plan')).length === 2, 20_000)
  await until('the release reached the controller', () => audit(dir).filter((l) => l.event === 'session_deposited').length === 2, 20_000)

  node.child.kill('SIGTERM')
  const code = await node.exited
  t.equal(code, 0, 'exit status 0')
  if (code !== 0) t.comment(node.output())
  t.same(lines().filter((l) => l.endsWith(' leave')).sort(), ['stop 0 leave', 'stop 1 leave'], "every shard's stop command ran, with PXE_STOP_REASON=leave")
  t.same(await liveNodes(ctl.port), ['node-b'], 'node-a is gone from the plan at once')
  const lines0 = audit(dir)
  t.ok(lines0.some((l) => l.event === 'node_left' && l.node_id === 'node-a'), 'audited node_left')
  t.notOk(lines0.some((l) => l.event === 'node_expired'), 'not after the lease')
  t.same(lines0.filter((l) => l.event === 'session_deposited').map((l) => l.shard_id).sort(), [0, 1, 2, 3], 'the leave deposited the sessions of 0 and 1')

  const plan = await call(ctl.port, b, '/v1/checkin', checkinBody('node-b', { capacity: 4, generation: joined.json.generation }))
  t.same(plan.json.assigned, [0, 1, 2, 3], "node-b holds node-a's shards")
  for (const shard of [0, 1, 2, 3]) {
    const claim = await call(ctl.port, b, '/v1/identify', { node_id: 'node-b', shard_id: shard })
    t.match(claim.json, { granted: true, mode: 'resume', session: { session_id: `SeSsIoNx${shard}`, sequence: Number(`47${shard}`), resume_url: GATEWAY } }, `shard ${shard}: granted at once, as a resume of node-a's session`)
  }
  const logs = node.output()
  t.match(logs, /"msg":"left on purpose/, 'the log says it left')
  t.notMatch(logs, /SeSsIoNx/, 'no session ID in the log')
})

t.test('a second SIGTERM during a slow stop: the stop command is killed and pxe-node exits at once, without a leave', async (t) => {
  const dir = join(root, 'twice')
  const ctl = await controllerIn(pki, dir, SETTINGS)
  t.teardown(() => ctl.running.stop())
  const marks = join(root, 'twice-marks.txt')
  const lines = marksIn(marks)
  const onStart = `echo "start $PXE_SHARD_ID" >> '${marks}'`
  // A stop that would take 20 s, far past the stop timeout of 10 s.
  const onStop = `echo "stop $PXE_SHARD_ID begun" >> '${marks}'; sleep 20; echo "stop $PXE_SHARD_ID done" >> '${marks}'`
  const node = pxeNode(t, ctl.port, ['--stop-timeout-ms', '10000'], onStart, onStop)
  await until('node-a started its 4 shards', () => lines().filter((l) => l.startsWith('start')).length === 4, 20_000)
  node.child.kill('SIGTERM')
  await until('every stop command began', () => lines().filter((l) => l.endsWith('begun')).length === 4)
  node.child.kill('SIGTERM')
  // Well before the stop timeout (10 s) would have ended the stops.
  await until('pxe-node exited', () => node.exitCode() !== null, 5000)
  t.equal(await node.exited, 0, 'exit status 0')
  t.match(node.output(), /second signal received: stopping at once/)
  t.match(node.output(), /shard stop cut short/)
  const left = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).split('\n').filter((l) => l.includes(marks))
  t.same(left, [], 'the stop commands were killed with their process groups')
  t.notOk(audit(dir).some((l) => l.event === 'node_left'), 'no leave was sent')
  t.same(await liveNodes(ctl.port), ['node-a'], 'node-a stays in the plan until its lease runs out')
})
