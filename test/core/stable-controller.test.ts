// The stable planner inside the controller (SPEC "Planner choice"): moves, persisted ranges, restarts and
// a planner change between runs.
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import { durableStateSchema } from '../../src/core/durable-state-schema.js'
import type { DurableState } from '../../src/core/durable-state.js'
import { body, cert, checkIn, controllerWith, SETTINGS, T0 } from './fixtures.js'

const STABLE = { planner: 'stable' as const }
const roundTrip = (s: DurableState): DurableState => durableStateSchema.parse(JSON.parse(JSON.stringify(s))) as DurableState
const owners = (c: Controller) => Array.from({ length: c.plan(T0).totalShards }, (_, s) => c.ownerOf(s))
const ranges = (c: Controller, now = T0) => c.plan(now).nodes.map((n) => [n.nodeId, n.rangeStart, n.rangeCount])

/** Four nodes of 32 over 64 shards (16 each), then b revoked. */
function afterLeave(settings = STABLE): Controller {
  const c = controllerWith([['a', 32], ['b', 32], ['c', 32], ['d', 32]], settings)
  c.removeRevoked(T0, (serial) => serial === 'a1')
  c.drainEvents()
  return c
}

t.test('a leave moves only the leaver\'s shards, to its neighbours', async (t) => {
  const c = controllerWith([['a', 32], ['b', 32], ['c', 32], ['d', 32]], STABLE)
  // One join at a time, each carving its share out of its neighbours: inside the bound (8..32 each).
  t.same(ranges(c), [['a', 0, 32], ['b', 32, 10], ['c', 42, 8], ['d', 50, 14]])
  const before = owners(c)
  c.removeRevoked(T0, (serial) => serial === 'a1')
  const after = owners(c)
  const moved = before.flatMap((owner, s) => (owner === after[s] ? [] : [owner]))
  t.ok(moved.length > 0 && moved.every((owner) => owner === 'b'), 'every moved shard was b\'s')
  t.same(ranges(c), [['a', 0, 32], ['c', 32, 18], ['d', 50, 14]], 'c takes b\'s range (a is full); d keeps its own')
})

t.test('a join moves at most the joiner\'s fair share, only to the joiner', async (t) => {
  const c = afterLeave()
  const before = owners(c)
  checkIn(c, T0, body('bb', 32), cert('x'))
  const after = owners(c)
  const moved = before.flatMap((owner, s) => (owner === after[s] ? [] : [after[s]]))
  t.ok(moved.length > 0 && moved.length <= 16 && moved.every((owner) => owner === 'bb'), `${moved.length} shards moved, all to bb (fair share 16)`)
})

t.test('a restart under the same planner restores the ranges and moves no shard', async (t) => {
  const c = afterLeave()
  const state = roundTrip(c.snapshot())
  t.equal(state.meta.planner, 'stable', 'meta names the planner')
  t.same(state.nodes.map((n) => n.range), [[0, 32], [32, 18], [50, 14]], 'node records carry their ranges')
  const restored = new Controller({ ...SETTINGS, ...STABLE }, { state, now: T0 + 1000 })
  t.same(restored.drainEvents(), [], 'no generation change, no reshard')
  t.equal(restored.generation, c.generation)
  t.same(ranges(restored, T0 + 1000), ranges(c), 'the same plan')
  t.same(owners(restored), owners(c), 'the same owner of every shard')
  t.equal(restored.snapshot().meta.planFingerprint, c.snapshot().meta.planFingerprint)
})

t.test('the contiguous planner persists what it did before the choice existed', async (t) => {
  const state = roundTrip(afterLeave({} as typeof STABLE).snapshot())
  t.notOk('planner' in state.meta, 'no planner in meta')
  t.ok(state.nodes.every((n) => !('range' in n)), 'no ranges in node records')
  t.same(ranges(new Controller(SETTINGS, { state, now: T0 })), [['a', 0, 22], ['c', 22, 21], ['d', 43, 21]])
})

t.test('changing the planner between runs is a reshard (reason planner)', async (t) => {
  for (const [from, to] of [[{}, STABLE], [STABLE, {}]] as const) {
    const old = roundTrip(controllerWith([['a', 32], ['b', 32]], from).snapshot())
    const c = new Controller({ ...SETTINGS, ...to }, { state: old, now: T0 + 1000 })
    t.match(c.drainEvents(), [{ kind: 'generation_changed' }, { kind: 'reshard', reason: 'planner', waitingFor: 2 }], `${from === STABLE ? 'stable' : 'contiguous'} to ${to === STABLE ? 'stable' : 'contiguous'}`)
    t.equal(c.generation, old.meta.generation + 1)
  }
})

t.test('stored ranges that do not fit are not used: the plan starts over', async (t) => {
  const state = roundTrip(afterLeave().snapshot())
  const broken = { ...state, nodes: state.nodes.map((n) => ({ ...n, range: [0, 18] as const })) }
  const c = new Controller({ ...SETTINGS, ...STABLE }, { state: broken, now: T0 + 1000 })
  t.same(ranges(c, T0 + 1000), [['a', 0, 22], ['c', 22, 21], ['d', 43, 21]], 'the contiguous layout, as for a first plan')
  t.match(c.drainEvents(), [{ kind: 'generation_changed' }, { kind: 'reshard', reason: 'planner' }], 'another fingerprint: a reshard')
})
