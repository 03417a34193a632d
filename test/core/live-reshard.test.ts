/** SPEC "Live resharding" in the pure core: start, next-set claims, readiness, switch, abort, restore. */
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import { AppError } from '../../src/core/../errors.js'
import { body as plainBody, cert, checkIn, claimAnswered, LEASE_MS, SETTINGS, T0, claimAs } from './fixtures.js'
import type { CheckinBody } from '../../src/core/schemas.js'

/** Check-ins of agents that know live resharding (they always send next_ready_shards). */
const body = (nodeId: string, capacity: number, extra: Partial<CheckinBody> = {}) => plainBody(nodeId, capacity, { next_ready_shards: 0, ...extra })

function controllerWith(nodes: readonly [string, number][], settings: Partial<ControllerSettings> = {}, now = T0): Controller {
  const controller = new Controller({ ...SETTINGS, ...settings })
  nodes.forEach(([nodeId, capacity], i) => checkIn(controller, now, body(nodeId, capacity), cert(`a${i}`)))
  return controller
}
import type { ControllerSettings } from '../../src/core/types.js'

const NODES: [string, number][] = [
  ['n1', 8],
  ['n2', 8],
]
const SMALL: Partial<ControllerSettings> = { totalShards: 8, maxConcurrency: 4 }

function code(fn: () => unknown): string {
  try {
    fn()
  } catch (err) {
    if (err instanceof AppError) return err.code
    throw err
  }
  return 'no error'
}

/** Every node checks in at `now` reporting the generation and all its next-set shards running. */
function reportAllReady(c: Controller, now: number): void {
  for (const nodeId of ['n1', 'n2']) {
    const next = c.checkinOutcome(nodeId, { rotated: false, previousSerial: null }, 0).next
    checkIn(c, now, body(nodeId, 8, { generation: c.generation, next_ready_shards: next?.rangeCount ?? 0 }), cert(nodeId === 'n1' ? 'a0' : 'a1'))
  }
}

t.test('a start plans the next set over the live nodes and every plan carries it under a new generation', async (t) => {
  const c = controllerWith(NODES, SMALL)
  const before = c.generation
  const started = c.startReshard(T0 + 1, 16)
  t.same(started, { from: 8, to: 16, generation: before + 1 })
  const events = c.drainEvents().map((e) => e.kind)
  t.ok(events.includes('reshard_started') && events.includes('generation_changed'))
  const a = checkIn(c, T0 + 2, body('n1', 8), cert('a0'))
  const b = checkIn(c, T0 + 2, body('n2', 8), cert('a1'))
  t.same([a.totalShards, a.rangeStart, a.rangeCount], [8, 0, 4], 'the current set is unchanged')
  t.same(a.next, { totalShards: 16, rangeStart: 0, rangeCount: 8 })
  t.same(b.next, { totalShards: 16, rangeStart: 8, rangeCount: 8 })
  const view = c.plan(T0 + 3)
  t.match(view.reshard, { phase: 'identifying', fromTotalShards: 8, totalShards: 16, generation: before + 1, readyShards: 0, unassigned: 0 })
  t.same(view.nodes[1]!.next, { rangeStart: 8, rangeCount: 8, readyShards: 0 })
  t.equal(c.route(T0 + 3, String(5n << 22n)).shardId, 5, 'routing follows the current set (5 of 8)')
  t.equal(c.route(T0 + 3, String(13n << 22n)).shardId, 5, '13 mod 8')
})

t.test('refused starts change nothing', async (t) => {
  const cases: [string, Partial<ControllerSettings>, number, string][] = [
    ['not a multiple of max_concurrency', SMALL, 10, 'invalid_request'],
    ['the same count', SMALL, 8, 'invalid_request'],
    ['out of range', SMALL, 65_540, 'invalid_request'],
    ['a budget below N', { ...SMALL, dailyIdentifyLimit: 20 }, 24, 'budget_insufficient'],
  ]
  for (const [name, settings, n, expected] of cases) {
    const c = controllerWith(NODES, settings)
    const gen = c.generation
    const version = c.persistVersion
    c.drainEvents()
    t.equal(code(() => c.startReshard(T0 + 1, n)), expected, name)
    t.equal(c.generation, gen, `${name}: generation unchanged`)
    t.equal(c.persistVersion, version, `${name}: nothing to persist`)
    t.equal(c.plan(T0 + 1).reshard, null, `${name}: no reshard`)
    t.same(c.drainEvents(), [], `${name}: no event`)
  }
  const c = controllerWith(NODES, SMALL)
  c.startReshard(T0 + 1, 16)
  const gen = c.generation
  t.equal(code(() => c.startReshard(T0 + 2, 32)), 'reshard_in_progress', 'one at a time')
  t.equal(c.generation, gen)
  t.equal(c.plan(T0 + 2).reshard?.totalShards, 16, 'the running reshard stays')
  const budget = controllerWith(NODES, { ...SMALL, dailyIdentifyLimit: 16 })
  t.same(budget.startReshard(T0 + 1, 16).to, 16, 'a budget of exactly N is enough')

  // a node whose agent never sent next_ready_shards (an older agent refuses plans with a next set)
  const old = controllerWith(NODES, SMALL)
  checkIn(old, T0 + 1, plainBody('n0-old', 4), cert('old'))
  const oldGen = old.generation
  t.equal(code(() => old.startReshard(T0 + 2, 16)), 'agents_outdated', 'refused while a live node runs an older agent')
  t.equal(old.generation, oldGen)
  t.equal(old.plan(T0 + 2).reshard, null)
  checkIn(old, T0 + 3, plainBody('n0-old', 4, { next_ready_shards: 0 }), cert('old'))
  t.equal(old.startReshard(T0 + 4, 16).to, 16, 'accepted once it says it knows')
  const restored = new Controller({ ...SETTINGS, ...SMALL }, { state: controllerWith(NODES, SMALL).snapshot(), now: T0 + 5 })
  t.equal(code(() => restored.startReshard(T0 + 6, 16)), 'agents_outdated', 'after a restart, until each node checked in again')
})

t.test('next-set claims: owner in the next plan, buckets shared with the current set, daily budget counted', async (t) => {
  const c = controllerWith(NODES, { ...SMALL, dailyIdentifyLimit: 100 })
  checkIn(c, T0, body('n1', 8, { generation: c.generation }), cert('a0')) // releases 4..7 to n2
  t.equal(code(() => claimAs(c, T0 + 1, { node_id: 'n1', shard_id: 1, set: 'next' })), 'not_owner', 'no reshard: not_owner')
  c.startReshard(T0 + 1, 16)
  t.equal(code(() => claimAs(c, T0 + 2, { node_id: 'n1', shard_id: 9, set: 'next' })), 'not_owner', 'n2 holds next 9')
  t.equal(code(() => claimAs(c, T0 + 2, { node_id: 'n1', shard_id: 16, set: 'next' })), 'invalid_request', 'beyond N')
  const used = c.dailyBudgetRemaining(T0 + 2)!
  const current = claimAnswered(c, T0 + 2, { node_id: 'n1', shard_id: 1 })
  t.match(current, { granted: true, bucket: 1 })
  t.equal((current as { set?: string }).set, undefined, 'a current-set grant has no set')
  const busy = claimAnswered(c, T0 + 3, { node_id: 'n2', shard_id: 9, set: 'next' })
  t.match(busy, { granted: false, reason: 'bucket_busy' }, 'next 9 is bucket 1: busy after current 1')
  const granted = claimAnswered(c, T0 + 2 + 5100, { node_id: 'n2', shard_id: 9, set: 'next' })
  t.match(granted, { granted: true, mode: 'identify', set: 'next', shardId: 9, bucket: 1 })
  t.equal(c.dailyBudgetRemaining(T0 + 6000), used - 2, 'both grants count against the budget')
  t.match(claimAnswered(c, T0 + 2 + 5200, { node_id: 'n2', shard_id: 5 }), { granted: false, reason: 'bucket_busy' }, 'current 5 is bucket 1: busy after next 9')
  const granted2 = c.drainEvents().filter((e) => e.kind === 'identify_granted')
  t.same(granted2.map((e) => ('set' in e ? e.set : undefined)), [undefined, 'next'])
})

t.test('the switch comes once every next-set shard is reported running at the plan that carries it', async (t) => {
  const c = controllerWith(NODES, SMALL)
  c.startReshard(T0 + 1, 16)
  const startGen = c.generation
  // a report from before the reshard (older generation) does not count
  checkIn(c, T0 + 2, body('n1', 8, { generation: startGen - 1, next_ready_shards: 8 }), cert('a0'))
  t.match(c.plan(T0 + 2).reshard, { readyShards: 0 })
  checkIn(c, T0 + 3, body('n1', 8, { generation: startGen, next_ready_shards: 8 }), cert('a0'))
  checkIn(c, T0 + 3, body('n2', 8, { generation: startGen, next_ready_shards: 7 }), cert('a1'))
  t.match(c.plan(T0 + 3).reshard, { readyShards: 15 }, 'one shard short: no switch')
  t.equal(c.totalShards, 8)
  c.drainEvents()
  const out = checkIn(c, T0 + 4, body('n2', 8, { generation: startGen, next_ready_shards: 8 }), cert('a1'))
  t.equal(c.totalShards, 16, 'switched')
  t.equal(c.generation, startGen + 1, 'under a new generation')
  t.same([out.totalShards, out.rangeStart, out.rangeCount, out.next], [16, 8, 8, null], 'the next set is the plan; next disappears')
  t.same(c.drainEvents().map((e) => e.kind), ['generation_changed', 'reshard_switched'])
  t.equal(c.plan(T0 + 5).reshard, null)
  t.equal(c.route(T0 + 5, String(13n << 22n)).shardId, 13, 'routing follows the new set')
  t.equal(c.ownerOf(13), 'n2')
  const late = claimAnswered(c, T0 + 6, { node_id: 'n2', shard_id: 13, set: 'next' })
  t.match(late, { granted: true, shardId: 13 }, 'a next-set claim from a node that has not seen the switch is a current-set claim')
  t.equal((late as { set?: string }).set, undefined)
})

t.test('a join during the reshard re-plans both sets; moved next-set shards wait for their previous owner', async (t) => {
  const c = controllerWith(NODES, SMALL)
  c.startReshard(T0 + 1, 16)
  const startGen = c.generation
  reportAllReady(c, T0 + 2)
  t.equal(c.totalShards, 16, 'all ready: switched at once')

  const d = controllerWith(NODES, SMALL)
  d.startReshard(T0 + 1, 16)
  checkIn(d, T0 + 2, body('n1', 8, { generation: startGen, next_ready_shards: 8 }), cert('a0'))
  checkIn(d, T0 + 3, body('n3', 8), cert('a3')) // joins: both sets re-planned over three nodes
  const gen = d.generation
  t.ok(gen > startGen, 'a new generation')
  const n3 = d.checkinOutcome('n3', { rotated: false, previousSerial: null }, 0)
  t.ok(n3.next !== null && n3.next.rangeCount > 0, 'the joiner holds next-set shards')
  t.match(d.plan(T0 + 3).reshard, { readyShards: 0 }, 'readiness counts again from the new next plan')
  const first = n3.next!.rangeStart
  const wait = claimAnswered(d, T0 + 4, { node_id: 'n3', shard_id: first, set: 'next' })
  t.match(wait, { granted: false, reason: 'handoff_pending' }, 'n3 waits for the previous next-set owner')
  t.ok(d.plan(T0 + 4).reshard !== null && (d.plan(T0 + 4).reshard as { pendingHandoffs: number }).pendingHandoffs > 0)
  // the previous owner applies the plan: released
  checkIn(d, T0 + 5, body('n1', 8, { generation: gen, next_ready_shards: 0 }), cert('a0'))
  checkIn(d, T0 + 5, body('n2', 8, { generation: gen, next_ready_shards: 0 }), cert('a1'))
  t.match(d.plan(T0 + 5).reshard, { pendingHandoffs: 0 }, 'released')
  t.match(claimAnswered(d, T0 + 6, { node_id: 'n3', shard_id: first, set: 'next' }), { granted: true, set: 'next' })
})

t.test('a node that leaves during the reshard: its next-set shards move, the switch waits for them', async (t) => {
  const c = controllerWith([...NODES, ['n3', 8]], SMALL)
  c.startReshard(T0 + 1, 16)
  const gen = c.generation
  checkIn(c, T0 + LEASE_MS, body('n1', 8, { generation: gen, next_ready_shards: 8 }), cert('a0'))
  checkIn(c, T0 + LEASE_MS, body('n2', 8, { generation: gen, next_ready_shards: 8 }), cert('a1'))
  // n3 expires
  c.expireStaleNodes(T0 + LEASE_MS + 2)
  t.equal(c.plan(T0 + LEASE_MS + 2).nodes.length, 2)
  t.equal(c.totalShards, 8, 'no switch on stale readiness')
  const view = c.plan(T0 + LEASE_MS + 2).reshard as { readyShards: number; unassigned: number }
  t.equal(view.unassigned, 0)
  t.equal(view.readyShards, 0, 'the next set changed: reports count again from its generation')
})

t.test('abort drops the next set under a new generation; its claims are refused after', async (t) => {
  const c = controllerWith(NODES, SMALL)
  t.equal(code(() => c.abortReshard(T0 + 1)), 'not_found', 'nothing to abort')
  c.startReshard(T0 + 1, 16)
  const gen = c.generation
  c.drainEvents()
  t.same(c.abortReshard(T0 + 2), { from: 8, to: 16, generation: gen + 1 })
  t.match(c.drainEvents(), [{ kind: 'generation_changed' }, { kind: 'reshard_aborted', reason: 'operator' }])
  t.equal(checkIn(c, T0 + 3, body('n1', 8), cert('a0')).next, null)
  t.equal(c.totalShards, 8)
  t.equal(code(() => claimAs(c, T0 + 3, { node_id: 'n1', shard_id: 1, set: 'next' })), 'not_owner')
  t.equal(code(() => c.startReshard(T0 + 4, 32)), 'reshard_in_progress', 'n2 has not reported the abort: it may still run next-set shards')
  checkIn(c, T0 + 5, body('n2', 8, { generation: gen + 1 }), cert('a1'))
  t.equal(code(() => c.startReshard(T0 + 5, 32)), 'reshard_in_progress', 'n1 checked in before without reporting it: still waited for')
  checkIn(c, T0 + 6, body('n1', 8, { generation: gen + 1 }), cert('a0'))
  t.same(c.startReshard(T0 + 7, 32).to, 32, 'another reshard may start once every node reported the abort')
})

// Issue "Four ways one shard ends up with two owners", trigger 1: abort, a node joins, the same reshard again.
t.test('after an abort, no next-set shard is granted while the node that ran it may still run it', async (t) => {
  const c = controllerWith([['node-a', 4], ['node-b', 4]], { totalShards: 4, maxConcurrency: 1 })
  c.startReshard(T0 + 1, 8)
  const started = c.generation
  t.equal(started, 3, 'the join of node-b and the start: two generations')
  for (const [id, serial] of [['node-a', 'a0'], ['node-b', 'a1']] as const) checkIn(c, T0 + 2, body(id, 4, { generation: started }), cert(serial))
  t.same(c.checkinOutcome('node-a', { rotated: false, previousSerial: null }, 0).next, { totalShards: 8, rangeStart: 0, rangeCount: 4 })
  t.match(claimAnswered(c, T0 + 3, { node_id: 'node-a', shard_id: 3, set: 'next' }), { granted: true, set: 'next' }, 'node-a runs next-set shard 3/8')
  const aborted = c.abortReshard(T0 + 4).generation
  checkIn(c, T0 + 5, body('node-b', 4, { generation: aborted }), cert('a1')) // node-b applied the abort; node-a is silent
  checkIn(c, T0 + 6, body('node-c', 4), cert('a2'))
  const refused = (() => {
    try {
      c.startReshard(T0 + 7, 8)
    } catch (err) {
      return err as AppError
    }
    return null
  })()
  t.equal(refused?.code, 'reshard_in_progress', 'the same reshard again is refused while node-a may still run 3/8')
  t.match(refused?.message, /node node-a may still run shards of the 8-shard set/, 'naming the node and the set')
  t.ok(Number(refused?.extra['retry_after_ms']) > 0, 'with a retry-after')
  // node-a reports the abort's generation: its agent stopped 3/8 before it reports it
  checkIn(c, T0 + 8, body('node-a', 4, { generation: aborted }), cert('a0'))
  checkIn(c, T0 + 8, body('node-c', 4, { generation: aborted }), cert('a2'))
  c.startReshard(T0 + 9, 8)
  const owner = c.plan(T0 + 9).nodes.find((n) => n.next !== null && n.next.rangeStart <= 3 && 3 < n.next.rangeStart + n.next.rangeCount)!.nodeId
  t.not(owner, 'node-a', 'the new next set gives 3/8 to another node')
  // one Identify interval after node-a's grant (one bucket)
  t.match(claimAnswered(c, T0 + 3 + SETTINGS.identifyIntervalMs, { node_id: owner, shard_id: 3, set: 'next' }), { granted: true }, 'and it is granted: node-a stopped it')
})

t.test('after an abort, a node whose lease ran out no longer holds the next reshard back', async (t) => {
  const c = controllerWith([['node-a', 4], ['node-b', 4]], { totalShards: 4, maxConcurrency: 1 })
  c.startReshard(T0 + 1, 8)
  const aborted = c.abortReshard(T0 + 2).generation
  checkIn(c, T0 + LEASE_MS, body('node-b', 4, { generation: aborted }), cert('a1'))
  t.equal(code(() => c.startReshard(T0 + LEASE_MS, 8)), 'reshard_in_progress')
  t.equal(c.startReshard(T0 + LEASE_MS + 1, 8).to, 8, 'node-a expired: it stopped everything')
})

// Trigger 2: a switch, a join, and a reshard back to the count the switch retired.
t.test('after a switch, no old-set shard is granted while its old owner may still run it', async (t) => {
  const c = controllerWith([['node-a', 8], ['node-b', 8]], { totalShards: 4, maxConcurrency: 1 })
  checkIn(c, T0 + 1, body('node-a', 8, { generation: c.generation }), cert('a0')) // released 2..3 to node-b
  t.match(claimAnswered(c, T0 + 1, { node_id: 'node-b', shard_id: 3 }), { granted: true }, 'node-b runs 3/4')
  c.startReshard(T0 + 2, 8)
  let now = T0 + 3
  for (const [id, serial] of [['node-a', 'a0'], ['node-b', 'a1']] as const) {
    const next = c.checkinOutcome(id, { rotated: false, previousSerial: null }, 0).next!
    checkIn(c, now, body(id, 8, { generation: c.generation, next_ready_shards: next.rangeCount }), cert(serial))
  }
  t.equal(c.totalShards, 8, 'switched')
  const switched = c.generation
  checkIn(c, (now += 1), body('node-a', 8, { generation: switched }), cert('a0')) // node-a stopped its 4-set shards; node-b has not yet
  checkIn(c, (now += 1), body('node-c', 8), cert('a2'))
  t.equal(code(() => c.startReshard((now += 1), 4)), 'reshard_in_progress', 'back to 4 is refused while node-b may still run 3/4')
  checkIn(c, (now += 1), body('node-b', 8, { generation: switched }), cert('a1'))
  checkIn(c, now, body('node-c', 8, { generation: c.generation }), cert('a2'))
  t.equal(c.startReshard((now += 1), 4).to, 4, 'once node-b reported the switch')
})

t.test('the retired set survives a restart', async (t) => {
  const c = controllerWith([['node-a', 4], ['node-b', 4]], { totalShards: 4, maxConcurrency: 1 })
  c.startReshard(T0 + 1, 8)
  const aborted = c.abortReshard(T0 + 2).generation
  checkIn(c, T0 + 3, body('node-b', 4, { generation: aborted }), cert('a1'))
  const state = c.snapshot()
  t.same(state.meta.retired, { totalShards: 8, generation: aborted, waitingFor: ['node-a'] })
  const restored = new Controller({ ...SETTINGS, totalShards: 4, maxConcurrency: 1 }, { state, now: T0 + 10 })
  checkIn(restored, T0 + 11, body('node-b', 4, { generation: aborted }), cert('a1'))
  checkIn(restored, T0 + 11, body('node-a', 4), cert('a0')) // alive, but reports no generation yet
  t.equal(code(() => restored.startReshard(T0 + 12, 8)), 'reshard_in_progress', 'node-a is still waited for after the restart')
  checkIn(restored, T0 + 13, body('node-a', 4, { generation: aborted }), cert('a0'))
  t.equal(restored.startReshard(T0 + 14, 8).to, 8)
  t.equal(restored.snapshot().meta.retired, undefined)
})

t.test('a reshard in progress survives a restart; a switched count survives a restart with the old configuration', async (t) => {
  for (const planner of ['contiguous', 'stable'] as const) {
    const settings = { ...SETTINGS, ...SMALL, planner }
    const c = new Controller(settings)
    NODES.forEach(([id, cap], i) => checkIn(c, T0, body(id, cap), cert(`a${i}`)))
    c.startReshard(T0 + 1, 16)
    checkIn(c, T0 + 2, body('n3', 8), cert('a3')) // a join: a next-set handoff is pending
    const before = c.plan(T0 + 2)
    const restored = new Controller(settings, { state: c.snapshot(), now: T0 + 10 })
    const after = restored.plan(T0 + 10)
    t.equal(restored.generation, c.generation, `${planner}: same generation`)
    t.same(after.reshard, before.reshard, `${planner}: the same reshard, handoffs included`)
    t.same(after.nodes.map((n) => n.next && [n.next.rangeStart, n.next.rangeCount]), before.nodes.map((n) => n.next && [n.next.rangeStart, n.next.rangeCount]), `${planner}: the same next ranges`)
    t.same(restored.drainEvents().filter((e) => e.kind === 'reshard_aborted'), [])

    // finish it in the restored controller, then restart with the configuration unchanged
    const gen = restored.generation
    for (const [id, serial] of [['n1', 'a0'], ['n2', 'a1'], ['n3', 'a3']] as const) {
      const next = restored.checkinOutcome(id, { rotated: false, previousSerial: null }, 0).next!
      checkIn(restored, T0 + 11, body(id, 8, { generation: gen, next_ready_shards: next.rangeCount }), cert(serial))
    }
    t.equal(restored.totalShards, 16, `${planner}: switched`)
    const state = restored.snapshot()
    t.equal(state.meta.configuredTotalShards, 8, `${planner}: the configured count is remembered`)
    const again = new Controller(settings, { state, now: T0 + 20 })
    t.equal(again.totalShards, 16, `${planner}: a restart on the unchanged configuration keeps 16`)
    t.equal(again.generation, restored.generation, `${planner}: no reshard, no new generation`)
    const edited = new Controller({ ...settings, totalShards: 16 }, { state, now: T0 + 20 })
    t.equal(edited.totalShards, 16)
    t.equal(edited.snapshot().meta.configuredTotalShards, undefined, `${planner}: the configuration caught up`)
    const other = new Controller({ ...settings, totalShards: 32 }, { state, now: T0 + 20 })
    t.equal(other.totalShards, 32, `${planner}: another configured count is an offline reshard`)
    t.ok(other.drainEvents().some((e) => e.kind === 'reshard'))
  }
})

t.test('a restart with another configuration drops a live reshard (audited)', async (t) => {
  const c = controllerWith(NODES, SMALL)
  c.startReshard(T0 + 1, 16)
  const restored = new Controller({ ...SETTINGS, ...SMALL, totalShards: 32 }, { state: c.snapshot(), now: T0 + 10 })
  t.match(restored.drainEvents().filter((e) => e.kind === 'reshard_aborted'), [{ reason: 'restart', toTotalShards: 16 }])
  t.equal(restored.plan(T0 + 10).reshard?.phase, 'restart_barrier')
  t.equal(restored.snapshot().meta.liveReshard, undefined)
})
