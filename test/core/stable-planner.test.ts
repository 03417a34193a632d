import t from 'tap'
import { compareBytes, planContiguous, type OrderedPlan, type PlanInput, type Planner } from '../../src/core/planner.js'
import { balanceBounds, planStable, stableStep } from '../../src/core/stable-planner.js'
import { seededRandom } from './fixtures.js'

// SPEC "Planner choice", checked over random histories of joins, leaves (expiries and revocations are
// leaves to a planner), drains, undrains, capacity changes and restarts.
const HISTORIES = 300
const STEPS = 40
const ALPHABET = 'aAbBzZ09-_.'

interface Node {
  capacity: number
  draining: boolean
}
type Ranges = Map<string, readonly [start: number, count: number]>
type Event = 'join' | 'leave' | 'drain' | 'undrain' | 'capacity' | 'restart'

/** The planner's input over `live` in byte order, from the current ranges (nodes without one joined). */
function inputOf(totalShards: number, live: ReadonlyMap<string, Node>, current: Ranges): { order: string[]; input: PlanInput } {
  const order = [...live.keys()].sort(compareBytes)
  const range = (id: string) => current.get(id)
  const input: PlanInput = {
    totalShards,
    capacities: Int32Array.from(order, (id) => live.get(id)!.capacity),
    draining: Uint8Array.from(order, (id) => (live.get(id)!.draining ? 1 : 0)),
    currentStarts: Int32Array.from(order, (id) => range(id)?.[0] ?? 0),
    currentCounts: Int32Array.from(order, (id) => range(id)?.[1] ?? 0),
    fresh: Uint8Array.from(order, (id) => (range(id) === undefined ? 1 : 0)),
  }
  return { order, input }
}

function rangesOf(order: readonly string[], plan: OrderedPlan): Ranges {
  return new Map(order.map((id, i) => [id, [plan.starts[i]!, plan.counts[i]!] as const]))
}

/** Owner per shard (null: unassigned). */
function owners(totalShards: number, ranges: Ranges): (string | null)[] {
  const out: (string | null)[] = new Array<string | null>(totalShards).fill(null)
  for (const [id, [start, count]] of ranges) for (let s = start; s < start + count; s++) out[s] = id
  return out
}

/** The rules every planner keeps (SPEC "The planner" steps 1-5, "Planner choice" first sentence). */
function shapeProblem(order: readonly string[], input: PlanInput, plan: OrderedPlan): string | null {
  let end = 0
  let assigned = 0
  let capacity = 0
  for (let i = 0; i < order.length; i++) {
    const [start, count] = [plan.starts[i]!, plan.counts[i]!]
    if (count > input.capacities[i]!) return `${order[i]} over capacity`
    if (input.draining[i] === 1 && count > 0) return `draining ${order[i]} holds shards`
    if (input.draining[i] !== 1) capacity += input.capacities[i]!
    if (count > 0 && start < end) return `${order[i]} overlaps or is out of byte order`
    if (start < 0 || start + count > input.totalShards) return `${order[i]} outside 0..S-1`
    if (count > 0) end = start + count
    assigned += count
  }
  if (assigned !== plan.assigned) return 'assigned miscounted'
  if (input.totalShards - assigned !== Math.max(0, input.totalShards - capacity)) return `unassigned ${input.totalShards - assigned}, not max(0, S - C)`
  return null
}

/** docs/moving-shards.md "Planner choice": the balance bound. */
function boundProblem(order: readonly string[], input: PlanInput, plan: OrderedPlan): string | null {
  const { lo, hi, totalCapacity } = balanceBounds(input.totalShards, input.capacities, input.draining)
  for (let i = 0; i < order.length; i++) {
    if (input.draining[i] === 1) continue
    const count = plan.counts[i]!
    if (input.totalShards >= totalCapacity && count !== input.capacities[i]) return `${order[i]} not full while shards are unassigned`
    if (count < lo[i]! || count > hi[i]!) return `${order[i]} holds ${count}, outside ${lo[i]}..${hi[i]}`
  }
  return null
}

function sameRanges(a: Ranges, b: Ranges): boolean {
  return JSON.stringify([...a]) === JSON.stringify([...b])
}

/** The movement rules of one step (on the smallest move, before any rebalance). */
function moveProblem(event: Event, changed: readonly string[], input: PlanInput, order: readonly string[], before: Ranges, beforeLive: ReadonlyMap<string, Node>, after: Ranges): string | null {
  const S = input.totalShards
  const was = owners(S, before)
  const now = owners(S, after)
  const { hi } = balanceBounds(S, input.capacities, input.draining)
  const at = new Map(order.map((id, i) => [id, i]))
  const full = (id: string) => after.get(id)![1] >= hi[at.get(id)!]!
  const moved: number[] = []
  for (let s = 0; s < S; s++) if (was[s] !== now[s]) moved.push(s)
  if (event === 'leave' || event === 'drain' || event === 'capacity') {
    // Only the leavers' shards move, and further only through nodes that lack room.
    for (const s of moved) {
      const from = was[s] ?? null
      if (from === null || changed.includes(from)) continue
      if (!full(from)) return `shard ${s} of ${from} moved though ${from} has room`
    }
    for (const [id, [, count]] of before) {
      if (changed.includes(id) || !after.has(id)) continue
      if (after.get(id)![1] < Math.min(count, beforeLive.get(id)!.capacity)) return `${id} lost shards`
    }
  }
  if (event === 'join') {
    let capacityBefore = 0
    for (const node of beforeLive.values()) if (!node.draining) capacityBefore += node.capacity
    if (S > capacityBefore) return null // bringing unassigned shards to the joiner may shift ranges between
    const { want } = balanceBounds(S, input.capacities, input.draining)
    const gained = new Map<string, number>()
    for (const s of moved) {
      const to = now[s] ?? null
      if (to === null || !changed.includes(to)) return `shard ${s} moved to ${to}, not to the joiner`
      gained.set(to, (gained.get(to) ?? 0) + 1)
    }
    for (const [id, count] of gained) if (count > want[at.get(id)!]!) return `${id} took ${count}, over its fair share ${want[at.get(id)!]}`
  }
  return null
}

function randomName(random: () => number): string {
  let id = ALPHABET[Math.floor(random() * 8)]!
  for (let i = Math.floor(random() * 5); i > 0; i--) id += ALPHABET[Math.floor(random() * ALPHABET.length)]!
  return id
}

function drawEvent(random: () => number, live: ReadonlyMap<string, Node>): Event {
  const roll = random()
  if (live.size < 2 || roll < 0.35) return 'join'
  if (roll < 0.6) return 'leave'
  if (roll < 0.72) return 'drain'
  if (roll < 0.8) return 'undrain'
  if (roll < 0.9) return 'capacity'
  return 'restart'
}

t.test(`the stable planner over ${HISTORIES} random histories`, async (t) => {
  const random = seededRandom(19)
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!
  let problems = 0
  let rebalances = 0
  let steps = 0
  for (let h = 0; h < HISTORIES && problems === 0; h++) {
    const S = pick([1, 7, 64, 100, 1000, 4096])
    const maxCapacity = pick([4, 16, 128])
    const live = new Map<string, Node>()
    let current: Ranges = new Map()
    for (let step = 0; step < STEPS && problems === 0; step++) {
      const event = drawEvent(random, live)
      const beforeLive = new Map([...live].map(([id, node]) => [id, { ...node }]))
      const names = [...live.keys()]
      const changed: string[] = []
      if (event === 'join') {
        for (let k = random() < 0.2 ? 2 : 1; k > 0; k--) {
          const id = randomName(random)
          if (live.has(id)) continue
          live.set(id, { capacity: 1 + Math.floor(random() * maxCapacity), draining: false })
          changed.push(id)
        }
      } else if (event === 'leave') {
        for (let k = random() < 0.2 ? 3 : 1; k > 0 && live.size > 0; k--) {
          const id = pick([...live.keys()])
          live.delete(id)
          current.delete(id)
          changed.push(id)
        }
      } else if (event === 'drain' || event === 'undrain') {
        const id = pick(names)
        live.get(id)!.draining = event === 'drain'
        changed.push(id)
      } else if (event === 'capacity') {
        const id = pick(names)
        live.get(id)!.capacity = 1 + Math.floor(random() * maxCapacity)
        changed.push(id)
      }
      const before = current
      const { order, input } = inputOf(S, live, current)
      const step1 = stableStep(input)
      const plan = planStable(input)
      const after = rangesOf(order, plan)
      const say = (found: string | null) => {
        if (found === null) return
        problems += 1
        t.fail(`history ${h}, step ${step} (${event} ${changed.join(',')}, S=${S}): ${found}`)
      }
      say(shapeProblem(order, input, step1))
      say(shapeProblem(order, input, plan))
      say(boundProblem(order, input, plan))
      const step1InBound = boundProblem(order, input, step1) === null
      if (step1InBound && !sameRanges(rangesOf(order, step1), after)) say('a rebalance though the smallest move was inside the bound')
      if (!step1InBound) rebalances += 1
      // Undrain and capacity growth are not SPEC movement rules; a capacity cut is a partial leave.
      const rule = event === 'capacity' && live.get(changed[0]!)!.capacity >= beforeLive.get(changed[0]!)!.capacity ? null : event
      if (rule !== null) say(moveProblem(rule, changed, input, order, before, beforeLive, rangesOf(order, step1)))
      if (event === 'restart' && !sameRanges(before, after)) say('a restart changed the plan')
      // A restart or a take-over plans again from the stored ranges: the same plan.
      const again = planStable(inputOf(S, live, after).input)
      if (!sameRanges(rangesOf(order, again), after)) say('planning again over the same live set changed the plan')
      current = after
      steps += 1
    }
  }
  t.equal(problems, 0, 'every rule holds at every step')
  t.comment(`${steps} steps, ${rebalances} of them rebalanced`)
})

t.test('the rules every planner keeps, over the same random histories', async (t) => {
  const planners: Record<string, Planner> = { contiguous: planContiguous, stable: planStable }
  for (const [name, planner] of Object.entries(planners)) {
    const random = seededRandom(7)
    let problems = 0
    for (let h = 0; h < 100 && problems === 0; h++) {
      const S = 1 + Math.floor(random() * 2000)
      const live = new Map<string, Node>()
      let current: Ranges = new Map()
      for (let step = 0; step < 30 && problems === 0; step++) {
        const event = drawEvent(random, live)
        if (event === 'join') live.set(randomName(random), { capacity: 1 + Math.floor(random() * 128), draining: false })
        else if (event === 'leave') {
          const id = [...live.keys()][Math.floor(random() * live.size)]!
          live.delete(id)
          current.delete(id)
        } else if (event === 'drain' || event === 'undrain') live.get([...live.keys()][Math.floor(random() * live.size)]!)!.draining = event === 'drain'
        const { order, input } = inputOf(S, live, current)
        const plan = planner(input)
        const found = shapeProblem(order, input, plan)
        if (found !== null) {
          problems += 1
          t.fail(`${name}, history ${h}, step ${step}: ${found}`)
        }
        current = rangesOf(order, plan)
      }
    }
    t.equal(problems, 0, `${name}: one range per node in byte order, within capacity, unassigned = max(0, S - C)`)
  }
})
