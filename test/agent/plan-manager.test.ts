// The plan manager on a manual clock: authority counted from the moment a check-in was SENT, stops
// before it ends (each stop bounded by the stop timeout, the fail-safe that long plus the margin
// early), removals stopped before the generation is reported, failed stops retried, reshards restarted.
import t from 'tap'
import { ClaimScheduler } from '../../src/agent/claim-scheduler.js'
import type { PlanClaims } from '../../src/agent/plan-claims.js'
import { PlanManager, switchGraceMs, type AuthorityLoss } from '../../src/agent/plan-manager.js'
import { RequestBudget } from '../../src/agent/request-budget.js'
import { ShardRunner, type ShardContext, type ShardStopContext } from '../../src/agent/shard-runner.js'
import { FakeClock } from './fake-clock.js'
import { keyShard, shardKey } from '../../src/agent/shard-key.js'

/** The shard numbers of runner keys (shard count and number, agent/shard-key.ts). */
const shards = (keys: readonly number[]) => keys.map(keyShard)

function planOf(generation: number, start: number, count: number, leaseSeconds = 30, totalShards = 8, maxConcurrency = 8): PlanClaims {
  return {
    iss: 'c', sub: 'node-a', iat: 0, exp: leaseSeconds, generation, total_shards: totalShards, range_start: start, range_count: count,
    assigned: Array.from({ length: count }, (_, i) => start + i), lease_seconds: leaseSeconds, max_concurrency: maxConcurrency,
  }
}

const STOP_TIMEOUT_MS = 3000

function setup(opts: { failStops?: number; stopTakesMs?: number; session?: unknown } = {}) {
  const clock = new FakeClock()
  const stops: ShardStopContext[] = []
  const lost: AuthorityLoss[] = []
  const starts: ShardContext[] = []
  const timedOut: ShardStopContext[] = []
  const tooShort: string[] = []
  let reports = 0
  const kept: [number, unknown, number][] = []
  let failStops = opts.failStops ?? 0
  const runner = new ShardRunner(
    {
      onStart: (ctx) => void starts.push(ctx),
      onStop: async (ctx) => {
        if (failStops > 0) {
          failStops -= 1
          throw new Error('stuck')
        }
        // A slow stop that ignores its signal (the worst case: the runner must abandon it).
        if (opts.stopTakesMs !== undefined) await new Promise((r) => clock.setTimeout(() => r(undefined), opts.stopTakesMs!))
        stops.push(ctx)
        return opts.session as undefined
      },
    },
    {
      started: () => undefined, startFailed: () => undefined, resumeRefused: () => undefined, stopped: () => undefined, stopFailed: () => undefined,
      stopTimedOut: (ctx) => void timedOut.push(ctx), sessionDiscarded: () => undefined, stopCutShort: () => undefined,
    },
    { clock, stopTimeoutMs: () => STOP_TIMEOUT_MS, claimFresh: (_shard, signal) => scheduler.claimFresh(_shard, signal) },
  )
  let manager: PlanManager
  const scheduler = new ClaimScheduler({
    clock, budget: new RequestBudget(100, 100, () => clock.now()), identifyIntervalMs: 0, handoffPollMs: 1000,
    claim: async () => ({ outcome: { kind: 'granted', generation: 1, mode: 'identify' }, resume: null }),
    onGranted: (shard, _generation, resume, claimedAt) => manager.granted(shard, resume, claimedAt),
    onOutcome: () => undefined,
  })
  manager = new PlanManager({
    clock, nodeId: 'node-a', runner, scheduler, startRetryMs: 60_000,
    stopMarginMs: (leaseMs) => Math.min(5000, Math.floor(leaseMs / 6)),
    stopTimeoutMs: () => STOP_TIMEOUT_MS,
    leaseTooShort: (detail) => void tooShort.push(detail),
    reportNow: () => void (reports += 1),
    keepSession: (shard, value, generation) => void kept.push([shard, value, generation]),
    authorityLost: (reason) => void lost.push(reason),
  })
  return { clock, runner, manager, stops, starts, timedOut, tooShort, lost, kept, reports: () => reports }
}

t.test('authority ends lease_seconds after the check-in was sent, not answered; every shard stops before', async (t) => {
  const s = setup()
  await s.clock.advance(4000) // the answer took 4 s
  s.manager.accept(planOf(1, 0, 4), 0)
  await s.clock.advance(10)
  t.same(shards(s.runner.inPhase('running')), [0, 1, 2, 3], 'claimed and started')
  t.equal(s.manager.authorityDeadline, 30_000, 'sent at 0 + 30 s')
  await s.clock.advance(21_999 - s.clock.now())
  t.equal(s.stops.length, 0, 'still running 1 ms before the stop timeout + margin')
  await s.clock.advance(1)
  t.same(s.stops.map((c) => [c.shardId, c.reason]), [[0, 'lease_expiring'], [1, 'lease_expiring'], [2, 'lease_expiring'], [3, 'lease_expiring']], 'stopped 3 + 5 s before the end')
  t.same(s.lost, ['lease_expiring'])
  t.notOk(s.manager.hasAuthority())
  t.equal(s.manager.authorityDeadline, null, 'no authority held')
  t.equal(s.manager.leaseDeadline, 30_000, 'but the lease still runs: a renewal before 30 s keeps the range (retry-slack.ts)')
})

t.test('the lease deadline: none before a plan, none after a refused certificate or a shutdown', async (t) => {
  const s = setup()
  t.equal(s.manager.leaseDeadline, null, 'no plan yet')
  s.manager.accept(planOf(1, 0, 2), 0)
  t.equal(s.manager.leaseDeadline, 30_000, 'while authority holds: its end')
  s.manager.loseAuthority('certificate_refused')
  t.equal(s.manager.leaseDeadline, null, 'a probably refused certificate: no renewal is expected to keep it')
  s.manager.accept(planOf(1, 0, 2), 1000)
  t.equal(s.manager.leaseDeadline, 31_000, 'a renewal gives it back')
  s.manager.loseAuthority('shutdown')
  t.equal(s.manager.leaseDeadline, null, 'shut down')
})

t.test('a renewal moves the deadline to its own send time + lease', async (t) => {
  const s = setup()
  s.manager.accept(planOf(1, 0, 2), 0)
  await s.clock.advance(10_000)
  s.manager.accept(planOf(1, 0, 2), 9_000)
  t.equal(s.manager.authorityDeadline, 39_000)
  await s.clock.advance(30_999 - s.clock.now())
  t.equal(s.stops.length, 0)
  await s.clock.advance(1)
  t.equal(s.stops.length, 2)
  s.manager.accept(planOf(1, 0, 2), 31_000)
  await s.clock.advance(10)
  t.same(shards(s.runner.inPhase('running')), [0, 1], 'a later renewal gives authority back and the shards are claimed again')
})

t.test('removed shards stop first; then the new generation is applied and reported at once', async (t) => {
  const s = setup()
  s.manager.accept(planOf(1, 0, 4), 0)
  await s.clock.advance(10)
  t.equal(s.manager.appliedGeneration, 1)
  t.equal(s.reports(), 0, 'nothing removed, no early report')
  s.manager.accept(planOf(2, 0, 2), 1000)
  t.equal(s.manager.appliedGeneration, 1, 'not applied before the stops finished')
  await s.clock.advance(10)
  t.same(s.stops.map((c) => [c.shardId, c.reason]), [[2, 'plan'], [3, 'plan']])
  t.equal(s.manager.appliedGeneration, 2)
  t.equal(s.reports(), 1, 'one immediate check-in to release the handoff')
})

t.test('a stop that fails keeps the generation unreported until a retry succeeds', async (t) => {
  const s = setup({ failStops: 1 })
  s.manager.accept(planOf(1, 0, 2), 0)
  await s.clock.advance(10)
  s.manager.accept(planOf(2, 0, 1), 1000)
  await s.clock.advance(10)
  t.equal(s.manager.appliedGeneration, 1, 'shard 1 may still run: generation 2 not reported')
  t.same(shards(s.runner.inPhase('running')), [0, 1])
  t.equal(s.reports(), 0)
  s.manager.accept(planOf(2, 0, 1), 3000) // the next check-in retries the stop
  await s.clock.advance(10)
  t.same(shards(s.runner.inPhase('running')), [0])
  t.equal(s.manager.appliedGeneration, 2)
  t.equal(s.reports(), 1)
})

t.test('a stop as slow as the stop timeout still ends before authority does; a slower one is abandoned', async (t) => {
  const s = setup({ stopTakesMs: STOP_TIMEOUT_MS - 1 })
  s.manager.accept(planOf(1, 0, 1), 0)
  await s.clock.advance(10)
  await s.clock.advance(30_000 - s.clock.now())
  t.same(s.stops.map((c) => c.reason), ['lease_expiring'])
  t.ok(s.runner.held().length === 0, 'nothing runs when authority ends')
  t.same(s.timedOut, [])

  const slow = setup({ stopTakesMs: STOP_TIMEOUT_MS + 5000 })
  slow.manager.accept(planOf(1, 0, 1), 0)
  await slow.clock.advance(10)
  await slow.clock.advance(25_000 - slow.clock.now())
  t.same(slow.timedOut.map((c) => [c.shardId, c.reason, c.timeoutMs, c.signal.aborted]), [[0, 'lease_expiring', STOP_TIMEOUT_MS, true]], 'abandoned at the stop timeout, its signal aborted')
  t.same(shards(slow.runner.inPhase('running')), [0], 'and counted as possibly running')
})

t.test('a removal whose stop times out: the generation is not reported', async (t) => {
  const s = setup({ stopTakesMs: STOP_TIMEOUT_MS + 1000 })
  s.manager.accept(planOf(1, 0, 2), 0)
  await s.clock.advance(10)
  s.manager.accept(planOf(2, 0, 1), 1000)
  await s.clock.advance(STOP_TIMEOUT_MS + 10)
  t.same(s.timedOut.map((c) => [c.shardId, c.reason]), [[1, 'plan']])
  t.equal(s.manager.appliedGeneration, 1, 'generation 2 is not reported while shard 1 may run')
  t.equal(s.reports(), 0)
})

t.test('another total_shards: every session of the old count stops (reshard) before the report, then starts again', async (t) => {
  const s = setup()
  s.manager.accept(planOf(1, 0, 4, 30, 8, 8), 0)
  await s.clock.advance(10)
  t.same(s.starts.map((c) => [c.shardId, c.totalShards]), [[0, 8], [1, 8], [2, 8], [3, 8]])
  s.manager.accept(planOf(3, 0, 6, 30, 16, 8), 1000) // same numbers 0..3 kept, but of 16 shards now
  t.equal(s.manager.appliedGeneration, 1, 'not applied before the old sessions stopped')
  await s.clock.advance(10)
  t.same(s.stops.map((c) => [c.shardId, c.reason, c.totalShards]), [[0, 'reshard', 8], [1, 'reshard', 8], [2, 'reshard', 8], [3, 'reshard', 8]])
  t.equal(s.manager.appliedGeneration, 3)
  t.equal(s.reports(), 1, 'reported at once')
  await s.clock.advance(10)
  t.same(s.starts.slice(4).map((c) => [c.shardId, c.totalShards]).sort((a, b) => a[0]! - b[0]!), [[0, 16], [1, 16], [2, 16], [3, 16], [4, 16], [5, 16]], 'every shard of the range started under 16')
  t.same(shards(s.runner.inPhase('running')), [0, 1, 2, 3, 4, 5])
})

t.test('another max_concurrency alone: the same', async (t) => {
  const s = setup()
  s.manager.accept(planOf(1, 0, 2, 30, 8, 8), 0)
  await s.clock.advance(10)
  s.manager.accept(planOf(2, 0, 2, 30, 8, 4), 1000)
  await s.clock.advance(20)
  t.same(s.stops.map((c) => [c.shardId, c.reason, c.maxConcurrency]), [[0, 'reshard', 8], [1, 'reshard', 8]])
  t.same(s.starts.slice(2).map((c) => [c.shardId, c.maxConcurrency]), [[0, 4], [1, 4]])
})

t.test('a lease too short for the stop timeout + margin: refused with the figures, nothing starts', async (t) => {
  const s = setup()
  s.manager.accept(planOf(1, 0, 2, 10), 0) // 3000 + 1666 = 4666 fits in half of 10 s
  await s.clock.advance(10)
  t.same(s.tooShort, [])
  const short = setup()
  short.manager.accept(planOf(1, 0, 2, 8), 0) // 3000 + 1333 = 4333 > 4000
  await short.clock.advance(10)
  t.equal(short.tooShort.length, 1)
  t.match(short.tooShort[0]!, /stop timeout \(3000 ms\) and the stop margin \(1333 ms\) do not fit the controller's lease of 8 s.*at most 2667 ms/)
  t.same(short.starts, [], 'nothing started')
  t.equal(short.manager.accepted, null, 'the plan was not taken')
})

const SESSION = { sessionId: 'abc123', sequence: 42, resumeUrl: 'wss://gateway.discord.gg' }

t.test('a plan move hands the stop\'s session on with the generation that released it, before the report', async (t) => {
  const s = setup({ session: SESSION })
  s.manager.accept(planOf(1, 0, 4), 0)
  await s.clock.advance(10)
  s.manager.accept(planOf(2, 0, 2), 1000)
  await s.clock.advance(10)
  t.same(s.kept, [[2, SESSION, 2], [3, SESSION, 2]])
  t.equal(s.reports(), 1)
})

t.test('no session is handed on from a reshard, a fail-safe, a shutdown, or a stop of a shard the plan still gives', async (t) => {
  const reshard = setup({ session: SESSION })
  reshard.manager.accept(planOf(1, 0, 2, 30, 8, 8), 0)
  await reshard.clock.advance(10)
  reshard.manager.accept(planOf(2, 0, 2, 30, 16, 8), 1000)
  await reshard.clock.advance(10)
  t.same(reshard.stops.map((c) => c.reason), ['reshard', 'reshard'])
  t.same(reshard.kept, [], 'reshard')

  const failSafe = setup({ session: SESSION })
  failSafe.manager.accept(planOf(1, 0, 2), 0)
  await failSafe.clock.advance(30_000)
  t.same(failSafe.stops.map((c) => c.reason), ['lease_expiring', 'lease_expiring'])
  failSafe.manager.loseAuthority('shutdown')
  t.same(failSafe.kept, [], 'lease_expiring')

  // An answer that came too late to hold authority: every shard stops with reason plan, but the plan
  // still gives them to this node, so there is no handoff to deposit into.
  const late = setup({ session: SESSION })
  late.manager.accept(planOf(1, 0, 2), 0)
  await late.clock.advance(10)
  await late.clock.advance(21_000)
  late.manager.accept(planOf(1, 0, 2), -10_000) // its check-in was sent 31 s ago: its lease cannot hold the stops
  await late.clock.advance(10)
  t.same(late.stops.map((c) => c.reason), ['plan', 'plan'])
  t.same(late.kept, [], 'still assigned here')

  // A plan of another shard count that also takes the shard away: the stop is a plan move, but the
  // session belongs to the old count, so it must not travel.
  const moved = setup({ session: SESSION })
  moved.manager.accept(planOf(1, 0, 4, 30, 8, 8), 0)
  await moved.clock.advance(10)
  moved.manager.accept(planOf(2, 0, 2, 30, 16, 8), 1000)
  await moved.clock.advance(10)
  t.same(moved.stops.map((c) => [c.shardId, c.reason]), [[0, 'reshard'], [1, 'reshard'], [2, 'reshard'], [3, 'reshard']])
  t.same(moved.kept, [], 'a session of the old shard count')
})

t.test('a resume grant starts the shard with the session', async (t) => {
  const s = setup()
  s.manager.accept(planOf(1, 0, 0), 0)
  s.manager.accept({ ...planOf(2, 0, 1) }, 0)
  await s.clock.advance(10)
  t.equal(s.starts[0]!.resume, null, 'the scheduler granted an Identify')
  s.manager.accept(planOf(3, 0, 2), 0)
  s.manager.granted(shardKey(8, 1), SESSION, s.clock.now())
  await s.clock.advance(10)
  t.same(s.starts.map((c) => [c.shardId, c.resume]), [[0, null], [1, SESSION]])
})

/** A plan of `planOf` that also carries a live reshard's next set. */
function withNext(plan: PlanClaims, totalShards: number, start: number, count: number): PlanClaims {
  return { ...plan, next: { total_shards: totalShards, range_start: start, range_count: count, assigned: Array.from({ length: count }, (_, i) => start + i) } }
}

t.test('a live reshard: the next set runs beside the current one; at the switch it keeps running, the old set stops', async (t) => {
  const s = setup({ session: SESSION })
  s.manager.accept(planOf(1, 0, 2, 30, 8, 8), 0)
  await s.clock.advance(10)
  s.manager.accept(withNext(planOf(2, 0, 2, 30, 8, 8), 16, 0, 4), 1000)
  await s.clock.advance(10)
  t.same(s.stops, [], 'nothing of the current set stops')
  const started = s.starts.map((c) => [c.shardId, c.totalShards, c.set] as const).sort((a, b) => a[1] - b[1] || a[0] - b[0])
  t.same(started, [[0, 8, 'current'], [1, 8, 'current'], [0, 16, 'next'], [1, 16, 'next'], [2, 16, 'next'], [3, 16, 'next']])
  t.equal(s.manager.setOf(shardKey(16, 3)), 'next')
  t.equal(s.manager.setOf(shardKey(8, 1)), 'current')
  t.equal(s.manager.setOf(shardKey(32, 1)), null)
  t.equal(s.runner.held().length, 6, 'shard 0 and 1 run twice: of 8 and of 16')

  // the switch: 16 shards, the next range is the plan
  s.manager.accept(planOf(3, 0, 4, 30, 16, 8), 2000)
  await s.clock.advance(10)
  t.same(s.stops, [], 'the old set keeps running while the other nodes may not have learned of the switch yet')
  await s.clock.advance(switchGraceMs(30_000))
  t.same(s.stops.map((c) => [c.shardId, c.totalShards, c.reason]), [[0, 8, 'reshard'], [1, 8, 'reshard']], 'then only the old set stops')
  t.same(s.kept, [], 'no session of the old shard count is handed on')
  t.equal(s.starts.length, 6, 'the next-set sessions were not started again')
  t.same(shards(s.runner.inPhase('running')), [0, 1, 2, 3])
  t.equal(s.manager.appliedGeneration, 3)
})

t.test('an abort: the next set stops (no session handed on); a grant from past a reshard\'s plan is not used', async (t) => {
  const s = setup({ session: SESSION })
  s.manager.accept(withNext(planOf(1, 0, 2, 30, 8, 8), 16, 0, 4), 0)
  await s.clock.advance(10)
  t.equal(s.runner.held().length, 6)
  s.manager.accept(planOf(2, 0, 2, 30, 8, 8), 1000)
  await s.clock.advance(10)
  t.same(s.stops.map((c) => [c.shardId, c.totalShards, c.reason]).sort((a, b) => (a[0] as number) - (b[0] as number)), [[0, 16, 'reshard'], [1, 16, 'reshard'], [2, 16, 'reshard'], [3, 16, 'reshard']])
  t.same(s.kept, [])
  t.equal(s.runner.held().length, 2)

  const g = setup()
  g.manager.accept(withNext(planOf(5, 0, 0, 30, 8, 8), 16, 0, 0), 0)
  g.manager.accept(withNext(planOf(6, 0, 1, 30, 8, 8), 16, 0, 0), 0)
  g.runner.held().forEach((key) => void g.runner.stop(key, 'plan'))
  await g.clock.advance(10)
  const before = g.reports()
  const startsBefore = g.starts.length
  g.manager.granted(shardKey(8, 0), null, g.clock.now(), 9) // generation 9 > 6: maybe after the switch
  await g.clock.advance(10)
  t.equal(g.starts.length, startsBefore, 'not started on a grant from past the plan')
  t.equal(g.reports(), before + 1, 'the node checks in to learn the plan')
})
