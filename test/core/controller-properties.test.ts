import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import { durableStateSchema } from '../../src/core/durable-state-schema.js'
import type { DurableState } from '../../src/core/durable-state.js'
import type { PlannerName } from '../../src/core/planner.js'
import { planShards } from '../support/planner-by-name.js'
import { applyDeltas } from '../../src/state/apply-delta.js'
import { body, cert, checkIn, checkinView, claimAnswered, seededRandom, SETTINGS, T0 } from './fixtures.js'

const NAMES = ['a', 'B', 'c-1', 'C.2', 'd_3', '9z']
const SEQUENCES = 300
const STEPS = 60

/** Checks the controller's own consistency; returns the first problem, or null. */
function problem(c: Controller, now: number, lastGeneration: number, planner: PlannerName): string | null {
  const view = c.plan(now)
  if (view.generation < lastGeneration) return 'generation went backwards'
  const owned = new Map<number, string>()
  for (const node of view.nodes) {
    for (let s = node.rangeStart; s < node.rangeStart + node.rangeCount; s++) owned.set(s, node.nodeId)
    if (node.draining && node.rangeCount > 0) return `draining ${node.nodeId} owns shards`
  }
  for (let s = 0; s < view.totalShards; s++) if (c.ownerOf(s) !== (owned.get(s) ?? null)) return `ownerOf(${s}) disagrees`
  const live = new Set(view.nodes.map((n) => n.nodeId))
  if (live.size !== c.counts().live) return `the plan lists ${live.size} nodes, ${c.counts().live} are live`
  // The kept byte order and the merged joins give exactly the reference planner's answer.
  const reference = planShards(view.totalShards, view.nodes.map(({ nodeId, capacity, draining }) => ({ nodeId, capacity, draining })))
  if (JSON.stringify([...reference.ranges.keys()]) !== JSON.stringify(view.nodes.map((n) => n.nodeId))) return 'the plan is not in byte order'
  if (planner === 'stable') {
    // The same shape as the reference planner's, not the same ranges: within capacity, unassigned = max(0, S - C).
    let capacity = 0
    let end = 0
    for (const node of view.nodes) {
      if (node.rangeCount > 0 && node.rangeStart < end) return `${node.nodeId} overlaps the range before it`
      if (node.rangeCount > 0) end = node.rangeStart + node.rangeCount
      if (node.rangeCount > node.capacity) return `${node.nodeId} is over capacity`
      if (!node.draining) capacity += node.capacity
    }
    if (view.unassigned !== Math.max(0, view.totalShards - capacity)) return `${view.unassigned} unassigned, not max(0, S - C)`
  }
  for (const node of view.nodes) {
    const want = reference.ranges.get(node.nodeId)!
    if (planner === 'contiguous' && (want.rangeStart !== node.rangeStart || want.rangeCount !== node.rangeCount)) return `range of ${node.nodeId} differs from the planner's`
    const answer = checkinView(c, node.nodeId)
    if (answer.rangeStart !== node.rangeStart || answer.rangeCount !== node.rangeCount) return `check-in view of ${node.nodeId} differs from the plan`
  }
  for (const name of NAMES) if (!live.has(name) && checkinView(c, name).rangeCount !== 0) return `${name} is not live but has a range`
  const snapshot = c.snapshot()
  if (snapshot.handoffs.length > view.totalShards) return 'more handoffs than shards'
  for (const h of snapshot.handoffs) {
    // a revoked node inside its lease may still run what it had (SPEC "Leases")
    const revoked = (snapshot.meta.revoked ?? []).some(([nodeId]) => nodeId === h.fromNode)
    if (!live.has(h.fromNode) && !revoked) return `handoff of shard ${h.shardId} waits for ${h.fromNode}, who is neither live nor revoked inside its lease`
    if (c.ownerOf(h.shardId) === h.fromNode && !revoked) return `handoff of shard ${h.shardId} waits for its own owner`
    if (h.generation > view.generation) return 'handoff from the future'
  }
  return null
}

for (const planner of ['contiguous', 'stable'] as const)
t.test(`controller invariants over ${SEQUENCES} random operation sequences (${planner} planner)`, async (t) => {
  const random = seededRandom(42)
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!
  let failures = 0
  for (let run = 0; run < SEQUENCES && failures === 0; run++) {
    const totalShards = pick([1, 2, 7, 16, 64])
    const settings = { ...SETTINGS, totalShards, maxConcurrency: 1, identifyIntervalMs: 0, ...(planner === 'stable' ? { planner } : {}) }
    const c = new Controller(settings)
    // A store's view: the first state, then every delta applied; it must always equal the whole state.
    let mirror: DurableState = c.snapshot()
    let now = T0
    let lastGeneration = 0
    for (let step = 0; step < STEPS && failures === 0; step++) {
      now += Math.floor(random() * 12_000)
      const nodeId = pick(NAMES)
      const roll = random()
      try {
        if (roll < 0.1) {
          // Check-ins that arrive together: registered one by one, re-planned once.
          for (let k = 1 + Math.floor(random() * 3); k > 0; k--) {
            const joiner = pick(NAMES)
            c.register(now, body(joiner, 1 + Math.floor(random() * 32)), cert(`${NAMES.indexOf(joiner)}`))
          }
          c.settle()
        } else if (roll < 0.5) {
          const reported = random() < 0.5 ? undefined : Math.floor(random() * (c.generation + 1))
          checkIn(c, now, body(nodeId, 1 + Math.floor(random() * 32), { generation: reported }), cert(`${NAMES.indexOf(nodeId)}`))
        } else if (roll < 0.65) c.setDraining(now, nodeId, random() < 0.5, true)
        else if (roll < 0.7) c.removeRevoked(now, (serial) => serial === String(NAMES.indexOf(nodeId)))
        else claimAnswered(c, now, { node_id: nodeId, shard_id: Math.floor(random() * totalShards) })
      } catch (error) {
        if ((error as { code?: string }).code !== 'not_owner') throw error
      }
      if (random() < 0.3 || step === STEPS - 1) {
        mirror = applyDeltas(mirror, [c.takeDelta()])
        if (JSON.stringify(mirror) !== JSON.stringify(c.snapshot())) {
          failures += 1
          t.fail(`run ${run}, step ${step}: the deltas do not add up to the state`)
        }
      }
      const found = problem(c, now, lastGeneration, planner)
      if (found !== null) {
        failures += 1
        t.fail(`run ${run}, step ${step}: ${found}`)
      }
      if (step % 10 === 9) {
        // A restart at this point restores exactly the same state (and moves no shard).
        const state = durableStateSchema.parse(JSON.parse(JSON.stringify(c.snapshot()))) as DurableState
        const restored = new Controller(settings, { state, now })
        if (JSON.stringify(restored.snapshot()) !== JSON.stringify(c.snapshot()) || restored.generation !== c.generation) {
          failures += 1
          t.fail(`run ${run}, step ${step}: the restored state differs`)
        }
      }
      lastGeneration = c.generation
    }
  }
  t.equal(failures, 0, 'every step of every sequence is consistent')
})
