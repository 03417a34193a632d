// Session handoff through pxe-node (the compiled bin) against a real controller: the old owner's stop
// command prints the session as its last line, the new owner's start command sees it in PXE_RESUME_*
// and exits 75 (the gateway refused the RESUME), and the agent falls back to an Identify grant,
// running the start command again with PXE_START_MODE=identify. No session ID reaches a log.
import t, { type Test } from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { issueBundle } from '../../pki/issue-certs.js'
import { makePki } from '../e2e/harness.js'
import { controllerIn, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const BIN = fileURLToPath(new URL('../../bin/pxe-node.js', import.meta.url))
if (!existsSync(fileURLToPath(new URL('../../dist/src/agent/cli.js', import.meta.url)))) throw new Error('dist/ is missing: run "npm run build" (npm test does it first)')

const root = testDir(t)
const pki = await makePki(root)
const bundles = join(root, 'bundles')
const a = await issueBundle(pki.dir, 'node-a', 'node', { outDir: bundles })
const b = await issueBundle(pki.dir, 'node-b', 'node', { outDir: bundles })
const GATEWAY = 'ws://127.0.0.1:4567'

interface Node {
  readonly child: ChildProcess
  readonly exited: Promise<unknown>
  stdout(): string
}

function pxeNode(t: Test, bundleDir: string, port: number, onStart: string, onStop: string): Node {
  const child = spawn(process.execPath, [BIN, '--bundle', bundleDir, '--controller', urlOf(port), '--capacity', '2', '--log-level', 'debug', '--on-start', onStart, '--on-stop', onStop], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()))
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()))
  const exited = new Promise((resolve) => child.once('exit', resolve))
  t.teardown(() => child.kill('SIGKILL'))
  return { child, exited, stdout: () => out }
}

t.test('stop command prints the session; the new start command exits 75 on the resume; an Identify follows', async (t) => {
  // Two shards in two buckets; node-a (sorted first) holds both, then node-b's join takes shard 1.
  const ctl = await controllerIn(pki, join(root, 'c'), { total_shards: 2, max_concurrency: 2, lease_seconds: 6, identify_interval_ms: 5000, session_handoff: { allowed_hosts: ['127.0.0.1'], ttl_seconds: 60 } })
  t.teardown(() => ctl.running.stop())
  const marks = join(root, 'marks.txt')
  const lines = () => (existsSync(marks) ? readFileSync(marks, 'utf8').trim().split('\n') : [])
  const session = (shard: string) => `SeSsIoNx${shard}`
  const onStart = `echo "$PXE_NODE_ID start $PXE_SHARD_ID $PXE_START_MODE|\${PXE_RESUME_SESSION_ID-}|\${PXE_RESUME_SEQUENCE-}|\${PXE_RESUME_URL-}" >> '${marks}'; [ "$PXE_START_MODE" = resume ] && exit 75; exit 0`
  const onStop = `echo "$PXE_NODE_ID stop $PXE_SHARD_ID $PXE_STOP_REASON" >> '${marks}'; echo closing the gateway connection; printf '{"session_id":"SeSsIoNx%s","sequence":%s,"resume_url":"${GATEWAY}"}\\n' "$PXE_SHARD_ID" "47$PXE_SHARD_ID"`
  const nodeA = pxeNode(t, a.bundleDir, ctl.port, onStart, onStop)
  await until('node-a started both shards', () => lines().filter((l) => l.startsWith('node-a start')).length === 2, 20_000)
  t.same(lines().sort(), ['node-a start 0 identify|||', 'node-a start 1 identify|||'], 'first starts are Identifies, with no PXE_RESUME_*')
  const nodeB = pxeNode(t, b.bundleDir, ctl.port, onStart, onStop)
  await until('node-b started shard 1 as an Identify', () => lines().includes('node-b start 1 identify|||'), 30_000)
  const bLines = lines().filter((l) => l.startsWith('node-b') || l.startsWith('node-a stop'))
  t.same(bLines, ['node-a stop 1 plan', `node-b start 1 resume|${session('1')}|471|${GATEWAY}`, 'node-b start 1 identify|||'], "node-a's session reached node-b's start command; after exit 75 it ran again as an Identify")

  const audit = readFileSync(join(root, 'c', 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event: string; node_id?: string; shard_id?: number })
  const of = (event: string, node: string) => audit.filter((l) => l.event === event && l.node_id === node).map((l) => l.shard_id)
  t.same(of('session_deposited', 'node-a'), [1], 'deposited by the stop command')
  t.same(of('session_handed', 'node-b'), [1], 'handed to node-b')
  t.same(of('identify_granted', 'node-b'), [1], 'then an Identify grant (the fresh claim)')
  nodeA.child.kill('SIGTERM')
  nodeB.child.kill('SIGTERM')
  await Promise.all([nodeA.exited, nodeB.exited])
  for (const [name, node] of [['node-a', nodeA], ['node-b', nodeB]] as const) {
    t.notMatch(node.stdout(), /SeSsIoNx/, `no session ID in ${name}'s log`)
  }
  t.match(nodeB.stdout(), /"event":"resume_refused"/, 'node-b logged the refused resume')
  t.match(nodeA.stdout(), /"event":"sessions_deposited"/, 'node-a logged the deposit')
})
