/**
 * The seeded scenario of a fleet run (pure): which nodes exist, with which capacity, in which worker
 * process, and the churn schedule — joins, leaves, drains, pauses longer than a lease, controller
 * kill -9 and restarts, revocations, reshard restarts, slow-stop partitions, HA take-overs — at times within the
 * churn phase.
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
  /** The controller stopped by `signal` and started again `downMs` later with total_shards `totalShards`. */
  | { readonly at: number; readonly kind: 'reshard'; readonly downMs: number; readonly totalShards: number; readonly signal: 'SIGKILL' | 'SIGTERM' }
  /** The node's agent cut off the controller (a frozen proxy, its process running on) for at least `forMs`. */
  | { readonly at: number; readonly kind: 'partition'; readonly node: string; readonly forMs: number }
  /** kill -9 of the leading HA replica; it is started again (a follower) once the other one serves. */
  | { readonly at: number; readonly kind: 'takeover' }

/** Nodes, processes and the churn schedule (sorted by time). */
export interface Scenario {
  readonly nodes: readonly NodeSpec[]
  readonly processes: number
  /** Processes of partitioned nodes: each has a partition proxy and slow stop callbacks. */
  readonly partitionProcesses: readonly number[]
  readonly events: readonly ChurnEvent[]
}

/** Churn starts this long after the agents (they are joining meanwhile). */
const CHURN_START_MS = 2000

/** Node names sort in byte order as their numbers do (zero-padded). */
export function nodeName(index: number, total: number): string {
  return `fleet-${String(index + 1).padStart(Math.max(4, String(total).length), '0')}`
}

/**
 * Capacities lo or lo + 1 with lo = ceil(S / N), S the larger count when the run reshards: the total
 * stays near 1.25-2 × S, so that losing a few nodes still leaves room for every shard, and every node
 * gets at least one shard (the planner floors S × capacity / total, so a fleet much larger than S would
 * leave nodes idle and churn on them moot).
 */
function capacities(opts: FleetOptions, rng: Rng): number[] {
  if (opts.capacity !== null) return Array.from({ length: opts.nodes }, () => opts.capacity!)
  // Made for the larger count of a run with reshards: every node must hold a shard under either.
  const shards = Math.max(opts.churn.reshards > 0 ? Math.max(opts.shards, opts.reshardTo) : opts.shards, opts.liveReshardTo ?? 0)
  const lo = Math.min(127, Math.max(1, Math.ceil(shards / opts.nodes)))
  return Array.from({ length: opts.nodes }, () => rng.int(lo, lo + 1))
}

/** Builds the scenario of a run from its options (the seed decides everything random). */
export function buildScenario(opts: FleetOptions): Scenario {
  const rng = new Rng(opts.seed)
  const caps = capacities(opts, rng)
  const names = Array.from({ length: opts.nodes }, (_, i) => nodeName(i, opts.nodes))
  const { joins, leaves, revocations, pauses, partitions } = opts.churn
  const order = rng.shuffle(names)
  let k = 0
  const take = (n: number) => order.slice(k, (k += n))
  const joiners = new Set(take(joins))
  const paused = take(pauses)
  const leaving = take(leaves)
  const revoked = take(revocations)
  const partitioned = take(partitions)
  const steady = order.slice(k)

  // A paused node freezes its whole process (SIGSTOP), a partitioned one cuts its process's proxy off
  // and slows its stops: each gets a process of its own.
  const own = [...paused, ...partitioned]
  const processOf = new Map<string, number>(own.map((name, i) => [name, i]))
  const rest = names.filter((name) => !processOf.has(name))
  rest.forEach((name, i) => processOf.set(name, own.length + Math.floor(i / opts.perProcess)))
  const processes = own.length + Math.ceil(rest.length / opts.perProcess)
  const partitionProcesses = partitioned.map((name) => processOf.get(name)!)

  const nodes = names.map((name, i) => ({ name, capacity: caps[i]!, process: processOf.get(name)!, initial: !joiners.has(name) }))
  const events = schedule(opts, rng, { joiners: [...joiners], paused, leaving, revoked, partitioned, steady })
  return { nodes, processes, partitionProcesses, events }
}

interface Roles {
  readonly joiners: readonly string[]
  readonly paused: readonly string[]
  readonly leaving: readonly string[]
  readonly revoked: readonly string[]
  readonly partitioned: readonly string[]
  readonly steady: readonly string[]
}

function schedule(opts: FleetOptions, rng: Rng, roles: Roles): ChurnEvent[] {
  const end = opts.durationS * 1000
  const start = Math.min(CHURN_START_MS, end / 2)
  const at = () => Math.round(rng.between(start, end))
  // Revocations and pauses in the second half, so that their nodes run shards by then (after a cold start).
  const late = () => Math.round(rng.between((start + end) / 2, end))
  const middle = () => Math.round(rng.between((3 * start + end) / 4, (start + end) / 2))
  const leaseMs = opts.leaseS * 1000
  // The first reshard at the end of the churn, once the fleet runs every shard under the first count (its
  // barrier then holds them all); later ones anywhere, during a pause included.
  const reshardTimes = Array.from({ length: opts.churn.reshards }, (_, i) => (i === 0 ? end : at())).sort((a, b) => a - b)
  const events: ChurnEvent[] = [
    ...roles.joiners.map((node) => ({ at: at(), kind: 'join' as const, node })),
    ...roles.leaving.map((node) => ({ at: at(), kind: 'leave' as const, node })),
    ...roles.revoked.map((node) => ({ at: late(), kind: 'revoke' as const, node })),
    // Longer than a lease, so that the controller expires the frozen node and hands its shards on.
    ...roles.paused.map((node) => ({ at: late(), kind: 'pause' as const, node, forMs: leaseMs + rng.int(1000, 3000) })),
    ...Array.from({ length: opts.churn.restarts }, () => ({ at: at(), kind: 'restart' as const, downMs: rng.int(200, 1500) })),
    // At least longer than a lease, so that the controller expires the node (the runner keeps it on until
    // another node runs one of its shards); begun in the middle (it waits until its node runs a shard),
    // so that it ends with the churn.
    ...roles.partitioned.map((node) => ({ at: middle(), kind: 'partition' as const, node, forMs: leaseMs + rng.int(1000, 3000) })),
    ...Array.from({ length: opts.churn.takeovers }, () => ({ at: at(), kind: 'takeover' as const })),
    // Every other reshard (in time) goes back to --shards; each is a kill -9 or a graceful stop (SIGTERM) at random.
    ...reshardTimes.map((t, i) => ({
      at: t,
      kind: 'reshard' as const,
      downMs: rng.int(200, 1500),
      totalShards: i % 2 === 0 ? opts.reshardTo : opts.shards,
      signal: rng.int(0, 1) === 0 ? ('SIGKILL' as const) : ('SIGTERM' as const),
    })),
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
