/**
 * The seeded scenario of a fleet run (pure): which nodes exist, with which capacity, in which worker
 * process, and the churn schedule — joins, leaves, drains, pauses longer than a lease, controller
 * kill -9 and restarts, revocations — at times within the churn phase.
 */
import type { FleetOptions } from './options.js'
import { Rng } from './rng.js'

/** One simulated node. */
export interface NodeSpec {
  readonly name: string
  readonly capacity: number
  /** Index of the worker process that runs its agent. */
  readonly process: number
  /** Started at the beginning (false: it joins during the churn). */
  readonly initial: boolean
}

/** One churn event, `at` ms after the start of the run. */
export type ChurnEvent =
  | { readonly at: number; readonly kind: 'join'; readonly node: string }
  | { readonly at: number; readonly kind: 'leave'; readonly node: string }
  | { readonly at: number; readonly kind: 'drain'; readonly node: string; readonly draining: boolean }
  | { readonly at: number; readonly kind: 'pause'; readonly node: string; readonly forMs: number }
  | { readonly at: number; readonly kind: 'restart'; readonly downMs: number }
  | { readonly at: number; readonly kind: 'revoke'; readonly node: string }

/** Nodes, processes and the churn schedule (sorted by time). */
export interface Scenario {
  readonly nodes: readonly NodeSpec[]
  readonly processes: number
  readonly events: readonly ChurnEvent[]
}

/** Churn starts this long after the agents (they are joining meanwhile). */
const CHURN_START_MS = 2000

/** Node names sort in byte order as their numbers do (zero-padded). */
export function nodeName(index: number, total: number): string {
  return `fleet-${String(index + 1).padStart(Math.max(4, String(total).length), '0')}`
}

/**
 * Capacities lo or lo + 1 with lo = ceil(S / N): the total stays near 1.25-2 × S, so that losing a few
 * nodes still leaves room for every shard, and every node gets at least one shard (the planner floors
 * S × capacity / total, so a fleet much larger than S would leave nodes idle and churn on them moot).
 */
function capacities(opts: FleetOptions, rng: Rng): number[] {
  if (opts.capacity !== null) return Array.from({ length: opts.nodes }, () => opts.capacity!)
  const lo = Math.min(127, Math.max(1, Math.ceil(opts.shards / opts.nodes)))
  return Array.from({ length: opts.nodes }, () => rng.int(lo, lo + 1))
}

/** Builds the scenario of a run from its options (the seed decides everything random). */
export function buildScenario(opts: FleetOptions): Scenario {
  const rng = new Rng(opts.seed)
  const caps = capacities(opts, rng)
  const names = Array.from({ length: opts.nodes }, (_, i) => nodeName(i, opts.nodes))
  const { joins, leaves, revocations, pauses } = opts.churn
  const order = rng.shuffle(names)
  let k = 0
  const take = (n: number) => order.slice(k, (k += n))
  const joiners = new Set(take(joins))
  const paused = take(pauses)
  const leaving = take(leaves)
  const revoked = take(revocations)
  const steady = order.slice(k)

  // A paused node freezes its whole process (SIGSTOP): each gets a process of its own.
  const processOf = new Map<string, number>(paused.map((name, i) => [name, i]))
  const rest = names.filter((name) => !processOf.has(name))
  rest.forEach((name, i) => processOf.set(name, paused.length + Math.floor(i / opts.perProcess)))
  const processes = paused.length + Math.ceil(rest.length / opts.perProcess)

  const nodes = names.map((name, i) => ({ name, capacity: caps[i]!, process: processOf.get(name)!, initial: !joiners.has(name) }))
  const events = schedule(opts, rng, { joiners: [...joiners], paused, leaving, revoked, steady })
  return { nodes, processes, events }
}

interface Roles {
  readonly joiners: readonly string[]
  readonly paused: readonly string[]
  readonly leaving: readonly string[]
  readonly revoked: readonly string[]
  readonly steady: readonly string[]
}

function schedule(opts: FleetOptions, rng: Rng, roles: Roles): ChurnEvent[] {
  const end = opts.durationS * 1000
  const start = Math.min(CHURN_START_MS, end / 2)
  const at = () => Math.round(rng.between(start, end))
  // Revocations and pauses in the second half, so that their nodes run shards by then (after a cold start).
  const late = () => Math.round(rng.between((start + end) / 2, end))
  const leaseMs = opts.leaseS * 1000
  const events: ChurnEvent[] = [
    ...roles.joiners.map((node) => ({ at: at(), kind: 'join' as const, node })),
    ...roles.leaving.map((node) => ({ at: at(), kind: 'leave' as const, node })),
    ...roles.revoked.map((node) => ({ at: late(), kind: 'revoke' as const, node })),
    // Longer than a lease, so that the controller expires the frozen node and hands its shards on.
    ...roles.paused.map((node) => ({ at: late(), kind: 'pause' as const, node, forMs: leaseMs + rng.int(1000, 3000) })),
    ...Array.from({ length: opts.churn.restarts }, () => ({ at: at(), kind: 'restart' as const, downMs: rng.int(200, 1500) })),
  ]
  const drainable = rng.shuffle(roles.steady)
  for (let i = 0; i < opts.churn.drains && drainable.length > 0; i++) {
    const node = drainable[i % drainable.length]!
    const from = at()
    // Every drain is lifted before the churn ends, so that the final plan uses the whole fleet.
    events.push({ at: from, kind: 'drain', node, draining: true })
    events.push({ at: Math.min(end, from + rng.int(3000, 8000)), kind: 'drain', node, draining: false })
  }
  return events.sort((a, b) => a.at - b.at)
}
