// The shard runner's bounds: a stop cuts a start in progress short and still stops the shard; a stop
// is abandoned at the stop timeout; the CLI's commands are killed with their process group when the
// signal aborts. Session handoff: a refused resume claims a fresh Identify and starts again; a stop's
// session goes on only when the stop was a plan move; fresh claims end when the shard stops.
import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { pino } from 'pino'
import { runShardCommand } from '../../src/agent/shard-command.js'
import { ClaimAbortedError } from '../../src/agent/claim-scheduler.js'
import { ResumeRefusedError, type ResumableSession } from '../../src/agent/session.js'
import { ShardRunner, type ShardContext, type ShardStopContext } from '../../src/agent/shard-runner.js'
import { systemClock } from '../../src/agent/clock.js'
import { FakeClock } from './fake-clock.js'
import { testDir } from '../support/test-dir.js'

const silent = pino({ enabled: false })
const hooks = () => {
  const seen: string[] = []
  return {
    seen,
    hooks: {
      started: (c: ShardContext, mode: string) => void seen.push(`started ${c.shardId} ${mode}`),
      startFailed: (c: ShardContext) => void seen.push(`start failed ${c.shardId}`),
      stopped: (c: ShardStopContext) => void seen.push(`stopped ${c.shardId} ${c.reason}`),
      stopFailed: (c: ShardStopContext) => void seen.push(`stop failed ${c.shardId}`),
      stopTimedOut: (c: ShardStopContext) => void seen.push(`stop timed out ${c.shardId} after ${c.timeoutMs}`),
      resumeRefused: (c: ShardContext) => void seen.push(`resume refused ${c.shardId}`),
      sessionDiscarded: (c: ShardStopContext) => void seen.push(`session discarded ${c.shardId} ${c.reason}`),
      stopCutShort: (c: ShardStopContext) => void seen.push(`stop cut short ${c.shardId} ${c.reason}`),
    },
  }
}
const ctx = { nodeId: 'n', shardId: 3, generation: 1, totalShards: 8, maxConcurrency: 8, resume: null }

t.test('a stop during a start aborts the start, then stops the shard (it may have half started)', async (t) => {
  const h = hooks()
  const runner = new ShardRunner(
    {
      onStart: (c) => new Promise((_, reject) => c.signal.addEventListener('abort', () => reject(new Error('aborted')))),
      onStop: () => undefined,
    },
    h.hooks,
    { clock: systemClock, stopTimeoutMs: () => 1000, claimFresh: async () => systemClock.now() },
  )
  runner.start(ctx)
  t.equal(await runner.stop(3, 'plan'), true)
  t.same(h.seen, ['start failed 3', 'stopped 3 plan'])
  t.same(runner.held(), [])
})

t.test('a start that ignores its signal: the stop is abandoned at the stop timeout, the shard kept', async (t) => {
  const h = hooks()
  const runner = new ShardRunner({ onStart: () => new Promise(() => undefined), onStop: () => undefined }, h.hooks, { clock: systemClock, stopTimeoutMs: () => 50, claimFresh: async () => systemClock.now() })
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

const SESSION: ResumableSession = { sessionId: 'abc123', sequence: 42, resumeUrl: 'wss://gateway.discord.gg' }

/** Lets the runner's promise chains run. */
const settled = () => new Promise((r) => setTimeout(r, 20))

/** A claimFresh that records its calls and rejects with the signal's reason when it aborts (else grants after `ms`). */
function freshClaims(ms = 0) {
  const calls: { shard: number; signal: AbortSignal }[] = []
  const claimFresh = (shard: number, signal: AbortSignal) => {
    calls.push({ shard, signal })
    return new Promise<number>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason)
      const timer = setTimeout(() => resolve(systemClock.now()), ms)
      signal.addEventListener('abort', () => {
        clearTimeout(timer)
        reject(signal.reason)
      })
    })
  }
  return { calls, claimFresh }
}

t.test('a refused resume: one fresh Identify claimed, then onStart again with resume null', async (t) => {
  const h = hooks()
  const fresh = freshClaims()
  const starts: (ResumableSession | null)[] = []
  const runner = new ShardRunner(
    {
      onStart: (c) => {
        starts.push(c.resume)
        if (c.resume !== null) throw new ResumeRefusedError()
      },
      onStop: () => undefined,
    },
    h.hooks,
    { clock: systemClock, stopTimeoutMs: () => 1000, claimFresh: fresh.claimFresh },
  )
  runner.start({ ...ctx, resume: SESSION })
  await settled()
  t.same(starts, [SESSION, null])
  t.same(fresh.calls.map((c) => c.shard), [3], 'one fresh claim for the shard')
  t.same(h.seen, ['resume refused 3', 'started 3 identify'])
  t.same(runner.inPhase('running'), [3])
})

t.test('ResumeRefusedError from an Identify start, or from the start after a refused resume, is an ordinary failure', async (t) => {
  for (const resume of [null, SESSION]) {
    const h = hooks()
    const fresh = freshClaims()
    const runner = new ShardRunner({ onStart: () => Promise.reject(new ResumeRefusedError()), onStop: () => undefined }, h.hooks, { clock: systemClock, stopTimeoutMs: () => 1000, claimFresh: fresh.claimFresh })
    runner.start({ ...ctx, resume })
    await settled()
    t.same(h.seen, resume === null ? ['start failed 3'] : ['resume refused 3', 'start failed 3'], `resume ${resume === null ? 'null' : 'given'}`)
    t.equal(fresh.calls.length, resume === null ? 0 : 1, 'at most one fresh claim')
  }
})

t.test('a stop while the fresh claim waits: the claim ends at once, the start fails, the shard is stopped', async (t) => {
  const h = hooks()
  const fresh = freshClaims(60_000)
  const runner = new ShardRunner({ onStart: (c) => (c.resume === null ? undefined : Promise.reject(new ResumeRefusedError())), onStop: () => undefined }, h.hooks, { clock: systemClock, stopTimeoutMs: () => 1000, claimFresh: fresh.claimFresh })
  runner.start({ ...ctx, resume: SESSION })
  await settled()
  t.equal(await runner.stop(3, 'plan'), true)
  t.same(h.seen, ['resume refused 3', 'start failed 3', 'stopped 3 plan'])
  t.ok(fresh.calls[0]!.signal.reason instanceof ClaimAbortedError, 'the claim was aborted by the stop')
})

t.test("ctx.claimFreshIdentify: one claim per call, ended by the shard's stop or the caller's signal", async (t) => {
  const h = hooks()
  const fresh = freshClaims(60_000)
  let started: ShardContext | null = null
  const runner = new ShardRunner({ onStart: (c) => void (started = c), onStop: () => undefined }, h.hooks, { clock: systemClock, stopTimeoutMs: () => 1000, claimFresh: fresh.claimFresh })
  runner.start(ctx)
  await settled()
  const c = started! as ShardContext
  const caller = new AbortController()
  const mine = c.claimFreshIdentify({ signal: caller.signal })
  const other = c.claimFreshIdentify()
  t.equal(fresh.calls.length, 2, 'each call is a claim')
  caller.abort(new Error('the gateway client gave up'))
  await t.rejects(mine, /the gateway client gave up/, "the caller's own signal")
  await runner.stop(3, 'shutdown')
  await t.rejects(other, ClaimAbortedError, 'the stop ends the rest')
  const later = await c.claimFreshIdentify().catch((err: unknown) => err)
  t.ok(later instanceof ClaimAbortedError && later.reason === 'shard_stopped', 'and every later call')
})

t.test("a stop's session: handed on for a plan move, discarded otherwise, lost with a timed-out stop", async (t) => {
  const h = hooks()
  let slow = false
  const runner = new ShardRunner(
    { onStart: () => undefined, onStop: () => (slow ? new Promise<ResumableSession>((r) => setTimeout(() => r(SESSION), 200)) : SESSION) },
    h.hooks,
    { clock: systemClock, stopTimeoutMs: () => 50, claimFresh: async () => systemClock.now() },
  )
  const kept: unknown[] = []
  runner.start(ctx)
  await settled()
  t.equal(await runner.stop(3, 'plan', (value) => kept.push(value)), true)
  t.same(kept, [SESSION], 'a plan move hands the session on')
  runner.start(ctx)
  await settled()
  await runner.stop(3, 'shutdown')
  t.same(h.seen.slice(-2), ['stopped 3 shutdown', 'session discarded 3 shutdown'], 'without a receiver it is discarded')
  runner.start(ctx)
  await settled()
  slow = true
  t.equal(await runner.stop(3, 'plan', (value) => kept.push(value)), false)
  await new Promise((r) => setTimeout(r, 300))
  t.same(kept, [SESSION], "a timed-out stop's late session goes nowhere")
})

t.test("ctx.identifyGrantAgeMs: from the start grant's claim, then from the latest fresh claim; Infinity for a resume", async (t) => {
  const clock = new FakeClock()
  await clock.advance(10_000)
  const h = hooks()
  const starts: ShardContext[] = []
  const claimFresh = () => new Promise<number>((resolve) => {
    const sentAt = clock.now() + 100 // queued 100 ms behind the bucket, answered 300 ms after it went out
    clock.setTimeout(() => resolve(sentAt), 400)
  })
  const runner = new ShardRunner({ onStart: (c) => void starts.push(c), onStop: () => undefined }, h.hooks, { clock, stopTimeoutMs: () => 1000, claimFresh })
  runner.start({ ...ctx, grantClaimedAt: clock.now() - 300 })
  await clock.advance(0)
  const c = starts[0]!
  t.equal(c.identifyGrantAgeMs(), 300, "the start grant's claim went out 300 ms ago")
  t.notOk('grantClaimedAt' in c, 'the send time is no field of the context')
  await clock.advance(200)
  t.equal(c.identifyGrantAgeMs(), 500)
  const fresh = c.claimFreshIdentify()
  await clock.advance(400)
  await fresh
  t.equal(c.identifyGrantAgeMs(), 300, 'after a fresh grant: from the moment its claim went out')
  runner.start({ ...ctx, shardId: 4, resume: { sessionId: 'abc', sequence: 1, resumeUrl: 'wss://gateway.discord.gg' }, grantClaimedAt: clock.now() })
  await clock.advance(0)
  t.equal(starts[1]!.identifyGrantAgeMs(), Infinity, 'a resume start holds no grant')
})

t.test('hurry(): the stops under way end at once and their shards are let go; a stop asked later runs as usual', async (t) => {
  const h = hooks()
  const ended: number[] = []
  const onStop = (c: ShardStopContext) =>
    c.shardId === 3 ? new Promise<void>((resolve) => c.signal.addEventListener('abort', () => resolve())) : void ended.push(c.shardId)
  const runner = new ShardRunner({ onStart: () => undefined, onStop }, h.hooks, { clock: systemClock, stopTimeoutMs: () => 60_000, claimFresh: async () => systemClock.now() })
  runner.start(ctx)
  runner.start({ ...ctx, shardId: 4 })
  await new Promise((r) => setImmediate(r))
  const slow = runner.stop(3, 'leave')
  await new Promise((r) => setImmediate(r))
  runner.hurry()
  t.equal(await slow, false, 'not stopped: cut short')
  t.same(h.seen, ['started 3 identify', 'started 4 identify', 'stop cut short 3 leave'])
  t.same(runner.held(), [4], 'shard 3 let go, not kept to be stopped again')
  t.equal(await runner.stop(4, 'shutdown'), true, 'a stop asked after hurry() still runs its callback')
  t.same(ended, [4])
})
