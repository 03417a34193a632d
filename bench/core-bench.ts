/**
 * Benchmarks of the pure core: a full rebalance with planShards at S = 65536 for N = 16, 1024, 4096,
 * the same re-plan through the Controller, and check-ins per second when the plan does not change.
 */
import { Controller } from '../src/core/controller.js'
import type { CheckinBody } from '../src/core/schemas.js'
import type { CheckinOutcome, ControllerSettings } from '../src/core/types.js'
import { planShards, type PlannerNode } from '../test/support/planner-by-name.js'

const TOTAL_SHARDS = 65536
const SAMPLE_MS = 300
const SETTINGS: ControllerSettings = {
  totalShards: TOTAL_SHARDS,
  maxConcurrency: 16,
  leaseSeconds: 30,
  identifyIntervalMs: 5100,
  dailyIdentifyLimit: null,
}
const CERT = { serial: 'ab', notBefore: 0 }
const HEALTH = { ready_shards: 4, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 }

/** Deterministic capacities 1..128, every 17th node draining (an LCG: a bench needs no real randomness). */
function benchNodes(count: number): PlannerNode[] {
  let state = 12345
  return Array.from({ length: count }, (_, i) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0
    return { nodeId: `node-${String(i).padStart(5, '0')}`, capacity: 1 + (state % 128), draining: i % 17 === 0 }
  })
}

/** A check-in without batching: register, re-plan, answer. */
function checkIn(controller: Controller, now: number, body: CheckinBody): CheckinOutcome {
  const registration = controller.register(now, body, CERT)
  controller.settle()
  return controller.checkinOutcome(body.node_id, registration, now)
}

/** A controller with every node checked in at time 0. */
function loadedController(nodes: readonly PlannerNode[]): Controller {
  const controller = new Controller(SETTINGS)
  for (const { nodeId, capacity } of nodes) checkIn(controller, 0, { node_id: nodeId, capacity, ...HEALTH })
  controller.drainEvents()
  return controller
}

/** Runs `step` for three samples of about SAMPLE_MS after a warm-up; returns the best operations per second. */
function measure(step: (i: number) => void): number {
  let ops = 0
  for (const end = performance.now() + 100; performance.now() < end; ) step(ops++)
  let best = 0
  for (let sample = 0; sample < 3; sample++) {
    const start = performance.now()
    let done = 0
    let elapsed = 0
    while (elapsed < SAMPLE_MS) {
      for (let j = 0; j < 16; j++, done++) step(ops++)
      elapsed = performance.now() - start
    }
    best = Math.max(best, (done / elapsed) * 1000)
  }
  return best
}

const label = (what: string, count: number): string => `${what.padEnd(18)} S=${TOTAL_SHARDS} N=${String(count).padEnd(5)}`
const micros = (perSecond: number): string => `${(1e6 / perSecond).toFixed(1).padStart(9)} µs`

function benchRebalance(log: (line: string) => void, count: number): void {
  const nodes = benchNodes(count)
  const reversed = [...nodes].reverse() // alternate input orders so the sort does real work
  const plans = measure((i) => planShards(TOTAL_SHARDS, i % 2 === 0 ? nodes : reversed))
  log(`${label('planShards', count)} ${micros(plans)} per full rebalance`)

  // Through the Controller: plan, shard → owner table, diff, generation and handoffs. Toggling the
  // capacity of the second node between 1 and 128 moves most shards every time (a worst case).
  const controller = loadedController(nodes)
  const moving = nodes[1]!.nodeId
  const replans = measure((i) => {
    checkIn(controller, 1, { node_id: moving, capacity: i % 2 === 0 ? 128 : 1, ...HEALTH })
    controller.drainEvents()
  })
  log(`${label('Controller replan', count)} ${micros(replans)} per capacity change that moves most shards`)
}

function benchSteadyCheckins(log: (line: string) => void, count: number): void {
  const nodes = benchNodes(count)
  const controller = loadedController(nodes)
  const generation = controller.generation
  const bodies: CheckinBody[] = nodes.map(({ nodeId, capacity }) => ({ node_id: nodeId, capacity, ...HEALTH, generation }))
  // The clock advances 1 ms per round of check-ins, far inside the lease: no expiry is ever due.
  const perSecond = measure((i) => checkIn(controller, 1 + Math.floor(i / count), bodies[i % count]!))
  if (controller.generation !== generation) throw new Error('the steady-state bench changed the plan')
  const rate = Math.round(perSecond).toLocaleString('en-US').padStart(12)
  log(`${label('Controller checkIn', count)} ${rate} check-ins/s (plan unchanged)`)
}

/** Prints the core figures, one line each. */
export async function runCoreBench(log: (line: string) => void): Promise<void> {
  log(`# core (node ${process.version})`)
  for (const count of [16, 1024, 4096]) benchRebalance(log, count)
  benchSteadyCheckins(log, 1024)
}
