import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import { body, cert, checkIn, controllerWith, LEASE_MS, seededRandom, SETTINGS, T0, claimAs } from './fixtures.js'

const ranges = (c: Controller, now = T0) =>
  Object.fromEntries(c.plan(now).nodes.map((n) => [n.nodeId, [n.rangeStart, n.rangeCount]]))

t.test('generation: unchanged by repeats, health counts and a join that moves nothing', async (t) => {
  const c = controllerWith([['a', 1], ['b', 1]], { totalShards: 2, maxConcurrency: 1 })
  t.equal(c.generation, 2, 'two joins, two new mappings')
  t.same(c.drainEvents().filter((e) => e.kind === 'generation_changed'), [
    { kind: 'generation_changed', from: 0, to: 1 },
    { kind: 'generation_changed', from: 1, to: 2 },
  ])
  checkIn(c, T0 + 1, body('a', 1), cert('a0'))
  checkIn(c, T0 + 2, body('a', 1, { ready_shards: 1, fatal_shards: 3, generation: 2 }), cert('a0'))
  t.equal(c.generation, 2, 'repeat and health counts')
  checkIn(c, T0 + 3, body('c', 1), cert('c0')) // S=2 over three nodes of capacity 1: c gets nothing
  t.same(ranges(c, T0 + 3), { a: [0, 1], b: [1, 1], c: [2, 0] })
  t.equal(c.generation, 2, 'a join that moves no shard')
  t.same(c.drainEvents(), [], 'no generation event either')
})

t.test('generation: +1 on each real change', async (t) => {
  const c = controllerWith([['a', 16], ['b', 16]])
  const g = c.generation
  checkIn(c, T0, body('a', 32), cert('a0'))
  t.equal(c.generation, g + 1, 'capacity change')
  t.same(ranges(c), { a: [0, 32], b: [32, 16] })
  t.equal(c.setDraining(T0, 'a', true, true).generation, g + 2, 'drain (forced: b cannot take all of a)')
  t.equal(c.setDraining(T0, 'a', true).generation, g + 2, 'drain again is no change')
  t.equal(c.setDraining(T0, 'a', false).generation, g + 3, 'undrain')
  checkIn(c, T0 + LEASE_MS, body('b', 16), cert('a1'))
  c.expireStaleNodes(T0 + LEASE_MS + 1)
  t.equal(c.generation, g + 4, 'expiry of a')
  t.same(ranges(c, T0 + LEASE_MS + 1), { b: [0, 16] })
})

t.test('a reported generation above the current one is refused and changes nothing', async (t) => {
  const c = controllerWith([['a', 16]])
  const before = JSON.stringify(c.snapshot())
  const version = c.persistVersion
  c.drainEvents()
  t.throws(() => checkIn(c, T0 + 5, body('a', 32, { generation: 2 }), cert('a0')), { code: 'invalid_request', message: /generation 2 is above the controller's current generation 1: this node ran a plan this controller does not know \(state_dir restored from an older copy, or lost\?\)/ })
  t.throws(() => checkIn(c, T0 + 5, body('new', 8, { generation: 9 }), cert('n0')), { code: 'invalid_request' })
  t.equal(JSON.stringify(c.snapshot()), before)
  t.equal(c.persistVersion, version)
  t.equal(c.plan(T0 + 5).nodes[0]?.lastSeen, T0, 'the refused check-in did not renew the lease')
  t.same(c.drainEvents(), [])
  t.equal(checkIn(c, T0 + 6, body('a', 16, { generation: 1 }), cert('a0')).generation, 1, 'equal is fine')
})

t.test('leases: exactly lease_seconds is live, one millisecond more is expired', async (t) => {
  for (const operation of ['plan', 'route', 'checkIn', 'claimIdentify', 'setDraining', 'expire'] as const) {
    const c = controllerWith([['a', 16], ['b', 16]])
    checkIn(c, T0 + 10, body('b', 16), cert('a1'))
    c.drainEvents()
    const run = (now: number) => {
      if (operation === 'plan') c.plan(now)
      if (operation === 'route') c.route(now, '0')
      if (operation === 'checkIn') checkIn(c, now, body('z', 1), cert('z0'))
      if (operation === 'claimIdentify') t.throws(() => claimAs(c, now, { node_id: 'nobody', shard_id: 0 }))
      if (operation === 'setDraining') c.setDraining(now, 'other', true)
      if (operation === 'expire') c.expireStaleNodes(now)
    }
    run(T0 + LEASE_MS)
    t.equal(c.ownerOf(0), 'a', `${operation}: live at exactly the lease`)
    run(T0 + LEASE_MS + 1)
    t.equal(c.ownerOf(0), 'b', `${operation}: expired one ms later`)
    t.same(c.drainEvents().filter((e) => e.kind === 'node_expired'), [{ kind: 'node_expired', nodeId: 'a', lastSeen: T0 }])
  }
})

t.test('leases: a renewal moves the node to the back of the expiry order', async (t) => {
  const c = controllerWith([['a', 8], ['b', 8]])
  checkIn(c, T0 + 100, body('a', 8), cert('a0'))
  t.same(c.expireStaleNodes(T0 + LEASE_MS + 1), ['b'])
  t.same(c.expireStaleNodes(T0 + LEASE_MS + 100), [])
  t.same(c.expireStaleNodes(T0 + LEASE_MS + 101), ['a'])
  t.equal(c.plan(T0 + LEASE_MS + 101).nodes.length, 0)
})

t.test('leases: expiry matches a model of the lastSeen order through renewals, revocations and a clock that steps back', async (t) => {
  // The controller skips reading its live set while the head it found last is still the head and within
  // its lease (controller.ts expiryHead): a head renewed, revoked or expired must be found again.
  const random = seededRandom(24)
  const ids = Array.from({ length: 12 }, (_, i) => `n${i}`)
  const c = new Controller(SETTINGS)
  let order: Array<{ id: string; lastSeen: number }> = [] // the model: insertion order, oldest renewal first
  const expireModel = (now: number) => {
    const expired: string[] = []
    while (order.length > 0 && now - order[0]!.lastSeen > LEASE_MS) expired.push(order.shift()!.id)
    return expired
  }
  let now = T0
  for (let step = 0; step < 4000; step++) {
    const r = random()
    // mostly forward in small steps, now and then a jump past a lease, rarely a step back (a wall clock set back)
    now += r < 0.03 ? -Math.floor(random() * 5_000) : r < 0.08 ? LEASE_MS + Math.floor(random() * 2_000) : Math.floor(random() * 3_000)
    const pick = ids[Math.floor(random() * ids.length)]!
    const action = random()
    if (action < 0.55) {
      c.drainEvents()
      checkIn(c, now, body(pick, 8), cert(`${pick}-serial`))
      const expiredByCheckin = c.drainEvents().filter((e) => e.kind === 'node_expired').map((e) => (e as { nodeId: string }).nodeId)
      t.same(expiredByCheckin, expireModel(now), `step ${step}: the check-in's expiry`)
      order = order.filter((n) => n.id !== pick)
      order.push({ id: pick, lastSeen: now })
    } else if (action < 0.6) {
      // a revocation drops a node wherever it is: half the time the head (the one expiry found last), else any
      const victim = random() < 0.5 ? (order[0]?.id ?? pick) : pick
      const removed = c.removeRevoked(now, (serial) => serial === `${victim}-serial`)
      expireModel(now) // removeRevoked expires first, as every operation but a check-in does
      t.same(removed, order.some((n) => n.id === victim) ? [victim] : [], `step ${step}: the revocation`)
      order = order.filter((n) => n.id !== victim) // (its node may check in again: the test's stand-in for a new certificate)
    } else {
      t.same(c.expireStaleNodes(now), expireModel(now), `step ${step}: expiry`)
    }
    if (step % 500 === 0) t.same(c.plan(now).nodes.map((n) => n.nodeId).sort(), order.map((n) => n.id).sort(), `step ${step}: the live set`)
  }
})

t.test('rotation: a newer certificate replaces the recorded one; an older or equal one conflicts', async (t) => {
  const c = controllerWith([['a', 16]])
  c.drainEvents()
  const recorded = cert('a0').notBefore
  for (const notBefore of [recorded, recorded - 1]) {
    const before = JSON.stringify(c.snapshot())
    const version = c.persistVersion
    t.throws(() => checkIn(c, T0 + 1, body('a', 32), cert('ff', notBefore)), { code: 'identity_conflict' })
    t.equal(JSON.stringify(c.snapshot()), before, 'nothing changed')
    t.equal(c.persistVersion, version)
  }
  const outcome = checkIn(c, T0 + 2, body('a', 16), cert('b1', recorded + 1))
  t.match(outcome, { rotated: true, previousSerial: 'a0', rangeStart: 0, rangeCount: 16 })
  t.same(c.drainEvents(), [{ kind: 'node_rotated', nodeId: 'a', fromSerial: 'a0', toSerial: 'b1' }])
  t.equal(c.snapshot().nodes[0]?.certSerial, 'b1')
  t.throws(() => checkIn(c, T0 + 3, body('a', 16), cert('a0')), { code: 'identity_conflict' }, 'the old one is now older')
  t.match(checkIn(c, T0 + 4, body('a', 16), cert('b1', recorded + 1)), { rotated: false, previousSerial: null })
})

t.test('a node that is not live is accepted with any certificate', async (t) => {
  const c = controllerWith([['a', 16]])
  c.expireStaleNodes(T0 + LEASE_MS + 1)
  t.match(checkIn(c, T0 + LEASE_MS + 2, body('a', 16), cert('old', 0)), { rotated: false, rangeCount: 16 })
})

t.test('persistVersion moves only when the snapshot would', async (t) => {
  const c = controllerWith([['a', 16]])
  let version = c.persistVersion
  checkIn(c, T0 + 1, body('a', 16), cert('a0'))
  checkIn(c, T0 + 2, body('a', 16, { ready_shards: 16, starting_shards: 1 }), cert('a0'))
  t.equal(c.persistVersion, version, 'no-op and health-only check-ins')
  c.takeDelta() // the join's own marks
  t.equal(c.pendingReports, 0)
  // a new reported generation alone is written in the background: no answer waits for it
  checkIn(c, T0 + 3, body('a', 16, { generation: 1 }), cert('a0'))
  t.equal(c.persistVersion, version, 'a reported generation alone does not move it')
  t.equal(c.pendingReports, 1, 'it is a pending report instead')
  t.same(c.takeDelta(0).putNodes, [], 'a write that carries no reports leaves it')
  t.equal(c.pendingReports, 1)
  t.match(c.takeDelta(1).putNodes, [{ nodeId: 'a', reportedGeneration: 1 }], 'one that carries one writes the record')
  t.equal(c.pendingReports, 0)
  const moves: [string, () => unknown][] = [
    ['capacity', () => checkIn(c, T0 + 4, body('a', 8), cert('a0'))],
    ['join', () => checkIn(c, T0 + 5, body('b', 8), cert('b0'))],
    ['drain', () => c.setDraining(T0 + 6, 'b', true, true)],
    ['drain of a node that is not live', () => c.setDraining(T0 + 7, 'ghost', true)],
    ['rotation', () => checkIn(c, T0 + 8, body('a', 8, { generation: 1 }), cert('a9', T0))],
    ['revocation', () => c.removeRevoked(T0 + 9, (serial) => serial === 'b0')],
  ]
  for (const [label, move] of moves) {
    move()
    t.ok(c.persistVersion > version, label)
    version = c.persistVersion
  }
  checkIn(c, T0 + 10, body('a', 8, { generation: 1 }), cert('a9', T0))
  t.equal(c.persistVersion, version, 'the same report again')
  t.equal(c.pendingReports, 0, 'is not a report either')
})

t.test('a check-in that releases handoffs is written with its answer; its record goes in the background', async (t) => {
  const c = controllerWith([['a', 64]])
  checkIn(c, T0 + 1, body('a', 64, { generation: 1 }), cert('a0'))
  checkIn(c, T0 + 2, body('b', 64), cert('b0')) // b joins: a gives up half of the 64 shards at generation 2
  t.equal(c.generation, 2)
  const moved = c.takeDelta()
  t.ok(moved.putHandoffs.length > 0, 'the move is recorded as handoffs from a')
  const version = c.persistVersion
  checkIn(c, T0 + 3, body('a', 64, { generation: 2 }), cert('a0'))
  t.ok(c.persistVersion > version, 'the release moves persistVersion: its answer waits for it')
  t.equal(c.pendingReports, 1, "a's record (its new reported generation) is a report")
  const eager = c.takeDelta(0)
  t.same(eager.putNodes, [], 'the write the answer waits for carries no node record')
  t.same(eager.deleteHandoffs, moved.putHandoffs.map(([first, count]) => [first, count]), 'but every released run')
  t.match(c.takeDelta().putNodes, [{ nodeId: 'a', reportedGeneration: 2 }], 'the record follows in the background')
})

t.test('a report rides with the node record when something else about the node changed', async (t) => {
  const c = controllerWith([['a', 16]])
  c.takeDelta()
  checkIn(c, T0 + 1, body('a', 16, { generation: 1 }), cert('a0'))
  t.equal(c.pendingReports, 1)
  const version = c.persistVersion
  checkIn(c, T0 + 2, body('a', 8, { generation: 1 }), cert('a0'))
  t.ok(c.persistVersion > version, 'a capacity change is written eagerly')
  t.equal(c.pendingReports, 0, 'and takes the report with it')
  const delta = c.takeDelta(0)
  t.match(delta.putNodes, [{ nodeId: 'a', capacity: 8, reportedGeneration: 1 }], 'one record, with both')
  t.equal(delta.putNodes.length, 1)
})

t.test('drain flags are kept for nodes that are not live', async (t) => {
  const c = controllerWith([['a', 16]])
  t.same(c.setDraining(T0, 'b', true), { nodeId: 'b', draining: true, generation: 1, live: false, unassigned: 48 })
  t.same(c.plan(T0).drainFlagsNotLive, ['b'], 'the operator sees the flag waiting for b')
  checkIn(c, T0 + 1, body('b', 16), cert('b0'))
  t.same(c.plan(T0 + 1).drainFlagsNotLive, [], 'b is live now: its flag shows on its node row')
  t.same(ranges(c, T0 + 1), { a: [0, 16], b: [16, 0] })
  t.equal(c.generation, 1, 'a drained node joining moves nothing')
  t.match(c.plan(T0 + 1).nodes[1], { nodeId: 'b', draining: true })
  t.same(c.snapshot().draining, ['b'])
  for (const bad of ['..', '-x', '', 'a b', 'x'.repeat(65)]) {
    t.throws(() => c.setDraining(T0 + 1, bad, true), { code: 'invalid_request' }, JSON.stringify(bad))
  }
})

t.test('revoked nodes are removed at once', async (t) => {
  const c = controllerWith([['a', 16], ['b', 16]])
  c.drainEvents()
  t.same(c.removeRevoked(T0 + 1, (serial) => serial === 'a1'), ['b'])
  t.same(c.drainEvents(), [
    { kind: 'node_removed', nodeId: 'b', serial: 'a1', reason: 'revoked' },
    { kind: 'generation_changed', from: 2, to: 3 },
  ])
  t.same(ranges(c, T0 + 1), { a: [0, 16] })
  t.same(c.removeRevoked(T0 + 2, () => false), [])
})

t.test('the plan view', async (t) => {
  const c = controllerWith([['Zeta', 2], ['alpha', 2]], { totalShards: 5, maxConcurrency: 1 })
  checkIn(c, T0 + 1, body('beta', 2, { ready_shards: 1, starting_shards: 2, backoff_shards: 3, fatal_shards: 4, generation: 2 }), { ...cert('b'), notAfter: T0 + 86_400_000 })
  t.same(c.plan(T0 + 1), {
    generation: 3,
    totalShards: 5,
    maxConcurrency: 1,
    leaseSeconds: 30,
    unassigned: 0,
    planner: 'contiguous',
    identify: null,
    pendingHandoffs: 0, // beta took the shard nobody held
    reshard: null,
    drainFlagsNotLive: [],
    recentLeaves: [],
    rest: null,
    nodes: [
      { nodeId: 'Zeta', capacity: 2, draining: false, rangeStart: 0, rangeCount: 2, lastSeen: T0, generation: null, readyShards: 0, startingShards: 0, backoffShards: 0, fatalShards: 0, pendingHandoffs: 0, certNotAfter: null, next: null, rest: null },
      { nodeId: 'alpha', capacity: 2, draining: false, rangeStart: 2, rangeCount: 2, lastSeen: T0, generation: null, readyShards: 0, startingShards: 0, backoffShards: 0, fatalShards: 0, pendingHandoffs: 0, certNotAfter: null, next: null, rest: null },
      { nodeId: 'beta', capacity: 2, draining: false, rangeStart: 4, rangeCount: 1, lastSeen: T0 + 1, generation: 2, readyShards: 1, startingShards: 2, backoffShards: 3, fatalShards: 4, pendingHandoffs: 0, certNotAfter: T0 + 86_400_000, next: null, rest: null },
    ],
  })
})

t.test('bad settings are refused at construction', async (t) => {
  for (const bad of [{ totalShards: 0 }, { totalShards: 65537 }, { totalShards: 60, maxConcurrency: 16 }, { maxConcurrency: 0 }, { leaseSeconds: 0 }, { identifyIntervalMs: -1 }, { dailyIdentifyLimit: 0 }, { totalShards: 1.5 }]) {
    t.throws(() => new Controller({ ...SETTINGS, ...bad }), RangeError, JSON.stringify(bad))
  }
})
