// The plan manager on a manual clock: authority counted from the moment a check-in was SENT, stops
// before it ends, removals stopped before the generation is reported, failed stops retried.
import t from 'tap'
import { ClaimScheduler } from '../../src/agent/claim-scheduler.js'
import type { PlanClaims } from '../../src/agent/plan-claims.js'
import { PlanManager, type AuthorityLoss } from '../../src/agent/plan-manager.js'
import { RequestBudget } from '../../src/agent/request-budget.js'
import { ShardRunner, type ShardStopContext } from '../../src/agent/shard-runner.js'
import { FakeClock } from './fake-clock.js'

function planOf(generation: number, start: number, count: number, leaseSeconds = 30): PlanClaims {
  return {
    iss: 'c', sub: 'node-a', iat: 0, exp: leaseSeconds, generation, total_shards: 8, range_start: start, range_count: count,
    assigned: Array.from({ length: count }, (_, i) => start + i), lease_seconds: leaseSeconds, max_concurrency: 8,
  }
}

function setup(opts: { failStops?: number } = {}) {
  const clock = new FakeClock()
  const stops: ShardStopContext[] = []
  const lost: AuthorityLoss[] = []
  let reports = 0
  let failStops = opts.failStops ?? 0
  const runner = new ShardRunner(
    {
      onStart: () => undefined,
      onStop: (ctx) => {
        if (failStops > 0) {
          failStops -= 1
          throw new Error('stuck')
        }
        stops.push(ctx)
      },
    },
    { started: () => undefined, startFailed: () => undefined, stopped: () => undefined, stopFailed: () => undefined },
    () => clock.now(),
  )
  let manager: PlanManager
  const scheduler = new ClaimScheduler({
    clock, budget: new RequestBudget(100, 100, () => clock.now()), identifyIntervalMs: 0, handoffPollMs: 1000,
    claim: async () => ({ kind: 'granted', generation: 1 }),
    onGranted: (shard) => manager.granted(shard),
    onOutcome: () => undefined,
  })
  manager = new PlanManager({
    clock, nodeId: 'node-a', runner, scheduler, startRetryMs: 60_000,
    stopMarginMs: (leaseMs) => Math.min(5000, leaseMs / 6),
    reportNow: () => void (reports += 1),
    authorityLost: (reason) => void lost.push(reason),
  })
  return { clock, runner, manager, stops, lost, reports: () => reports }
}

t.test('authority ends lease_seconds after the check-in was sent, not answered; every shard stops before', async (t) => {
  const s = setup()
  await s.clock.advance(4000) // the answer took 4 s
  s.manager.accept(planOf(1, 0, 4), 0)
  await s.clock.advance(10)
  t.same(s.runner.inPhase('running'), [0, 1, 2, 3], 'claimed and started')
  t.equal(s.manager.authorityDeadline, 30_000, 'sent at 0 + 30 s')
  await s.clock.advance(24_999 - s.clock.now())
  t.equal(s.stops.length, 0, 'still running 1 ms before the margin')
  await s.clock.advance(1)
  t.same(s.stops.map((c) => [c.shardId, c.reason]), [[0, 'lease_expiring'], [1, 'lease_expiring'], [2, 'lease_expiring'], [3, 'lease_expiring']], 'stopped 5 s before the end')
  t.same(s.lost, ['lease_expiring'])
  t.notOk(s.manager.hasAuthority())
})

t.test('a renewal moves the deadline to its own send time + lease', async (t) => {
  const s = setup()
  s.manager.accept(planOf(1, 0, 2), 0)
  await s.clock.advance(10_000)
  s.manager.accept(planOf(1, 0, 2), 9_000)
  t.equal(s.manager.authorityDeadline, 39_000)
  await s.clock.advance(33_999 - s.clock.now())
  t.equal(s.stops.length, 0)
  await s.clock.advance(1)
  t.equal(s.stops.length, 2)
  s.manager.accept(planOf(1, 0, 2), 34_000)
  await s.clock.advance(10)
  t.same(s.runner.inPhase('running'), [0, 1], 'a later renewal gives authority back and the shards are claimed again')
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
  t.same(s.runner.inPhase('running'), [0, 1])
  t.equal(s.reports(), 0)
  s.manager.accept(planOf(2, 0, 1), 3000) // the next check-in retries the stop
  await s.clock.advance(10)
  t.same(s.runner.inPhase('running'), [0])
  t.equal(s.manager.appliedGeneration, 2)
  t.equal(s.reports(), 1)
})
