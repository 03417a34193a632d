// The fail-safe with a slow stop command, as issue 17 reproduced it: pxe-node (the compiled CLI) with
// lease 9 s and `--on-stop 'sleep 6'`, cut off from the controller by a frozen TCP proxy. The
// controller expires it and grants its shard to another node; that node's start must come after the
// old owner's stop command has ENDED (finished, or killed at the stop timeout), never while it runs.
import t from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { issueBundle } from '../../pki/issue-certs.js'
import { makePki } from '../e2e/harness.js'
import { frozenProxy } from '../support/frozen-proxy.js'
import { Recorder, controllerIn, nodeIdentities, recordingAgent, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const BIN = fileURLToPath(new URL('../../bin/pxe-node.js', import.meta.url))
if (!existsSync(fileURLToPath(new URL('../../dist/src/agent/cli.js', import.meta.url)))) throw new Error('dist/ is missing: run "npm run build" (npm test does it first)')

const root = testDir(t)
const pki = await makePki(root)
const { bundleDir } = await issueBundle(pki.dir, 'node-a', 'node', { outDir: join(root, 'bundles') })
const [idB] = await nodeIdentities(pki, ['node-b'])

interface LogLine { readonly time: number; readonly msg: string; readonly shardId?: number; readonly event?: string }

t.test('lease 9 s, a 6 s stop command, a partition: the old stop has ended before the new owner starts', async (t) => {
  // node-a (capacity 1) sorts first and holds shard 0; node-b (capacity 2) holds shard 1, then both.
  const ctl = await controllerIn(pki, join(root, 'c'), { total_shards: 2, max_concurrency: 2, lease_seconds: 9, identify_interval_ms: 5000 })
  t.teardown(() => ctl.running.stop())
  const proxy = await frozenProxy(ctl.port)
  t.teardown(() => proxy.close())
  const marks = join(root, 'marks.txt')
  const child = spawn(process.execPath, [
    BIN, '--bundle', bundleDir, '--controller', urlOf(proxy.port), '--capacity', '1', '--log-level', 'debug',
    '--on-start', `echo "start $PXE_SHARD_ID $(date +%s%3N)" >> '${marks}'`,
    '--on-stop', `echo "stop-begin $PXE_SHARD_ID $(date +%s%3N)" >> '${marks}'; sleep 6; echo "stop-end $PXE_SHARD_ID $(date +%s%3N)" >> '${marks}'`,
  ], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
  const exited = new Promise((resolve) => child.once('exit', resolve))
  t.teardown(() => child.kill('SIGKILL'))
  const mark = (kind: string) => (existsSync(marks) ? readFileSync(marks, 'utf8') : '').split('\n').filter((l) => l.startsWith(`${kind} `)).map((l) => Number(l.split(' ')[2]))
  await until('node-a started shard 0', () => mark('start').length === 1, 20_000)

  const rec = new Recorder()
  const b = recordingAgent(rec, idB, [urlOf(ctl.port)], { capacity: 2 })
  t.teardown(() => b.stop())
  await b.start()
  await until('node-b runs shard 1', () => rec.running('node-b').join() === '1', 20_000)

  proxy.freeze()
  await until('node-b took shard 0 over', () => rec.running('node-b').includes(0), 30_000)
  const bStart = rec.shardEvents.find((e) => e.node === 'node-b' && e.shard === 0 && e.kind === 'start')!.wall
  // Whatever node-a's stop command does, give it time to end (its sleep would end 6 s after it began).
  await until("node-a's stop command ended", () => mark('stop-begin').length === 1 && Date.now() > mark('stop-begin')[0]! + 6500, 20_000)
  child.kill('SIGTERM')
  await exited
  const logs = stdout.trim().split('\n').map((l) => JSON.parse(l) as LogLine)
  const stopEnd = logs.find((l) => l.shardId === 0 && (l.event === 'shard_stopped' || l.event === 'shard_stop_failed' || l.event === 'shard_stop_timed_out'))
  t.ok(stopEnd, 'node-a logged the end of its stop of shard 0')
  t.equal(stopEnd!.event, 'shard_stop_timed_out', 'the 6 s stop ran past the default stop timeout (lease/6) and was killed')
  t.equal(mark('stop-end').length, 0, 'the killed command never reached its end')
  t.comment(`node-a's stop began ${bStart - mark('stop-begin')[0]!} ms and ended ${bStart - stopEnd!.time} ms before node-b started shard 0`)
  t.ok(stopEnd!.time < bStart, "node-a's stop command had ended before node-b started shard 0")
  const ended = mark('stop-end')
  t.ok(ended.length === 0 || ended[0]! < bStart, 'the stop command did not outlive the handoff')
})

t.test('the library: a stop timeout the lease cannot hold halts at the first plan, which is not taken', async (t) => {
  const ctl = await controllerIn(pki, join(root, 'c-lib'), { total_shards: 2, max_concurrency: 2, lease_seconds: 6, identify_interval_ms: 5000 })
  t.teardown(() => ctl.running.stop())
  const rec = new Recorder()
  const b = recordingAgent(rec, idB, [urlOf(ctl.port)], { capacity: 2, stopTimeoutMs: 2500 })
  t.teardown(() => b.stop())
  await b.start()
  const end = await b.closed
  t.equal(end.reason, 'stop_timeout_too_long')
  t.match(end.detail, /stop timeout \(2500 ms\) and the stop margin \(1000 ms\) do not fit the controller's lease of 6 s.*at most 2000 ms/)
  t.same(rec.events('node-b', 'plan_accepted'), [], 'the plan was not taken')
  t.same(rec.shardEvents, [], 'nothing started')
  t.equal(b.status().state, 'halted')
})
