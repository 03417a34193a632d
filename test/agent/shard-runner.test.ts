// The shard runner's bounds: a stop cuts a start in progress short and still stops the shard; a stop
// is abandoned at the stop timeout; the CLI's commands are killed with their process group when the
// signal aborts.
import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { pino } from 'pino'
import { runShardCommand } from '../../src/agent/shard-command.js'
import { ShardRunner, type ShardContext, type ShardStopContext } from '../../src/agent/shard-runner.js'
import { systemClock } from '../../src/agent/clock.js'
import { testDir } from '../support/test-dir.js'

const silent = pino({ enabled: false })
const hooks = () => {
  const seen: string[] = []
  return {
    seen,
    hooks: {
      started: (c: ShardContext) => void seen.push(`started ${c.shardId}`),
      startFailed: (c: ShardContext) => void seen.push(`start failed ${c.shardId}`),
      stopped: (c: ShardStopContext) => void seen.push(`stopped ${c.shardId} ${c.reason}`),
      stopFailed: (c: ShardStopContext) => void seen.push(`stop failed ${c.shardId}`),
      stopTimedOut: (c: ShardStopContext) => void seen.push(`stop timed out ${c.shardId} after ${c.timeoutMs}`),
    },
  }
}
const ctx = { nodeId: 'n', shardId: 3, generation: 1, totalShards: 8, maxConcurrency: 8 }

t.test('a stop during a start aborts the start, then stops the shard (it may have half started)', async (t) => {
  const h = hooks()
  const runner = new ShardRunner(
    {
      onStart: (c) => new Promise((_, reject) => c.signal.addEventListener('abort', () => reject(new Error('aborted')))),
      onStop: () => undefined,
    },
    h.hooks,
    { clock: systemClock, stopTimeoutMs: () => 1000 },
  )
  runner.start(ctx)
  t.equal(await runner.stop(3, 'plan'), true)
  t.same(h.seen, ['start failed 3', 'stopped 3 plan'])
  t.same(runner.held(), [])
})

t.test('a start that ignores its signal: the stop is abandoned at the stop timeout, the shard kept', async (t) => {
  const h = hooks()
  const runner = new ShardRunner({ onStart: () => new Promise(() => undefined), onStop: () => undefined }, h.hooks, { clock: systemClock, stopTimeoutMs: () => 50 })
  runner.start(ctx)
  t.equal(await runner.stop(3, 'lease_expiring'), false)
  t.same(h.seen, ['stop timed out 3 after 50'])
  t.same(runner.held(), [3], 'it may still run')
})

t.test('the stop command is killed with its process group when the stop timeout passes', async (t) => {
  const dir = testDir(t)
  const marks = join(dir, 'marks')
  const abort = new AbortController()
  const stop: ShardStopContext = { ...ctx, signal: abort.signal, reason: 'plan', timeoutMs: 300 }
  // A child of the shell (the grandchild of the agent) must die too: it would write the mark.
  const running = runShardCommand(`(sleep 1; echo late >> '${marks}') & sleep 5`, 'stop', stop, silent)
  setTimeout(() => abort.abort(), 200)
  await t.rejects(running, /the stop command ran past the stop timeout \(300 ms\) and was killed with its process group/)
  await new Promise((r) => setTimeout(r, 1300))
  t.notOk(existsSync(marks) && readFileSync(marks, 'utf8').includes('late'), 'nothing of the group ran on')
  const limit: ShardStopContext = { ...ctx, signal: new AbortController().signal, reason: 'plan', timeoutMs: 200 }
  await t.rejects(runShardCommand('sleep 5', 'stop', limit, silent), /ran longer than 200 ms and was killed/, 'its own timer too, without the signal')
})
