// A restart with another total_shards or max_concurrency than the state was written with (issue 9, "also
// decide and test"): treated as a reshard. The plan is recomputed under a new generation and no Identify is
// granted until every restored node applied that plan (reported the generation) or left.
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import { durableStateSchema } from '../../src/core/durable-state-schema.js'
import type { DurableState } from '../../src/core/durable-state.js'
import { body, cert, checkIn, controllerWith, LEASE_MS, SETTINGS, T0, claimAs } from './fixtures.js'

const roundTrip = (s: DurableState): DurableState => durableStateSchema.parse(JSON.parse(JSON.stringify(s))) as DurableState
const before = () => roundTrip(controllerWith([['a', 32], ['b', 32]]).snapshot())
const INTERVAL = SETTINGS.identifyIntervalMs

t.test('a new total_shards: new generation, audited, Identify held until every restored node applied it', async (t) => {
  const old = before()
  const now = T0 + 10_000
  const c = new Controller({ ...SETTINGS, totalShards: 128 }, { state: old, now })
  t.equal(c.generation, old.meta.generation + 1, 'the new plan has its own generation')
  t.match(c.drainEvents(), [
    { kind: 'generation_changed' },
    { kind: 'reshard', reason: 'total_shards', fromTotalShards: 64, toTotalShards: 128, fromMaxConcurrency: 16, toMaxConcurrency: 16, generation: c.generation, waitingFor: 2 },
  ])
  t.same(c.snapshot().meta.reshard, { generation: c.generation, waitingFor: ['a', 'b'] }, 'the barrier is part of the state')
  t.same(c.plan(now).reshard, { phase: 'restart_barrier', totalShards: 128, generation: c.generation, waitingNodes: 2 }, 'the operator sees the barrier')
  const later = now + INTERVAL // every bucket is free again after the restart
  const a = checkIn(c, later, body('a', 32), cert('a0'))
  t.match(a, { rangeStart: 0, rangeCount: 32 })
  t.same(claimAs(c, later, { node_id: 'a', shard_id: 0 }), { granted: false, reason: 'handoff_pending', retryAfterMs: LEASE_MS + 1 }, 'held until the last waited-for lease (a, just renewed) would run out')
  checkIn(c, later, body('a', 32, { generation: c.generation }), cert('a0'))
  t.equal(claimAs(c, later, { node_id: 'a', shard_id: 0 }).granted, false, 'still waiting for b')
  checkIn(c, later + 1, body('b', 32, { generation: c.generation }), cert('a1'))
  t.match(claimAs(c, later + 1, { node_id: 'a', shard_id: 0 }), { granted: true }, 'granted once both applied the new plan')
  t.equal(c.snapshot().meta.reshard, null, 'the barrier is gone from the state')
  t.equal(c.plan(later + 1).reshard, null)
})

t.test('a restored node that leaves (expires) releases the barrier; an old report does not', async (t) => {
  const now = T0 + 10_000
  const c = new Controller({ ...SETTINGS, totalShards: 128 }, { state: before(), now })
  const gen = c.generation
  checkIn(c, now + 1, body('a', 32, { generation: gen - 1 }), cert('a0'))
  t.same(c.snapshot().meta.reshard?.waitingFor, ['a', 'b'], 'a report of the old generation releases nothing')
  checkIn(c, now + LEASE_MS, body('a', 32, { generation: gen }), cert('a0'))
  t.same(c.snapshot().meta.reshard?.waitingFor, ['b'])
  t.same(c.expireStaleNodes(now + LEASE_MS + 1), ['b'], 'b never came back')
  t.match(claimAs(c, now + LEASE_MS + 2, { node_id: 'a', shard_id: 1 }), { granted: true })
})

t.test('a restart during a reshard keeps waiting for the same nodes', async (t) => {
  const now = T0 + 10_000
  const first = new Controller({ ...SETTINGS, totalShards: 128 }, { state: before(), now })
  checkIn(first, now + 1, body('a', 32, { generation: first.generation }), cert('a0'))
  const mid = roundTrip(first.snapshot())
  t.same(mid.meta.reshard?.waitingFor, ['b'])
  const second = new Controller({ ...SETTINGS, totalShards: 128 }, { state: mid, now: now + 100 })
  t.equal(second.generation, first.generation, 'no new generation: same settings')
  t.same(second.snapshot().meta.reshard, mid.meta.reshard, 'still waiting for b')
  t.same(second.drainEvents(), [], 'nothing new to audit')
  t.equal(claimAs(second, now + 100 + INTERVAL, { node_id: 'a', shard_id: 0 }).granted, false)
})

t.test('max_concurrency alone: audited, the plan and generation stay, no barrier', async (t) => {
  const old = before()
  const c = new Controller({ ...SETTINGS, maxConcurrency: 32 }, { state: old, now: T0 + 10_000 })
  t.equal(c.generation, old.meta.generation)
  t.match(c.drainEvents(), [{ kind: 'reshard', reason: 'max_concurrency', fromTotalShards: 64, toTotalShards: 64, fromMaxConcurrency: 16, toMaxConcurrency: 32, waitingFor: 0 }])
  t.equal(c.snapshot().meta.reshard, null)
  t.match(claimAs(c, T0 + 10_000 + INTERVAL, { node_id: 'a', shard_id: 0 }), { granted: true, bucket: 0 })
})

t.test('a state from before maxConcurrency was recorded loads, and is not taken for a change', async (t) => {
  const old = before()
  const legacy = { ...old, meta: { ...old.meta, maxConcurrency: null } }
  const c = new Controller(SETTINGS, { state: roundTrip(legacy), now: T0 + 10_000 })
  t.same(c.drainEvents(), [])
  t.equal(c.snapshot().meta.maxConcurrency, 16, 'recorded from now on')
})

t.test('no restored nodes: nothing to wait for', async (t) => {
  const empty = roundTrip(new Controller(SETTINGS).snapshot())
  const c = new Controller({ ...SETTINGS, totalShards: 128 }, { state: empty, now: T0 })
  t.equal(c.snapshot().meta.reshard, null)
  t.match(c.drainEvents(), [{ kind: 'reshard', waitingFor: 0 }])
})
