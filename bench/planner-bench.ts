/**
 * One drain and one join at N = 10,000, S = 65,536, capacity 8, under each planner (SPEC "Planner choice"):
 * main-thread ms per re-plan through the Controller (planner, owner table, diff, handoffs) and the shards
 * that changed owner.
 */
import { Controller } from '../src/core/controller.js'
import type { PlannerName } from '../src/core/planner.js'
import type { ControllerSettings } from '../src/core/types.js'

const TOTAL_SHARDS = 65536
const NODES = 10_000
const CAPACITY = 8
const ROUNDS = 20
const CERT = { serial: 'ab', notBefore: 0 }
const HEALTH = { ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 }

const nodeId = (i: number) => `node-${String(i).padStart(5, '0')}`

/** Every node registered at time 0 and planned once (the same layout under both planners). */
function loaded(planner: PlannerName): Controller {
  const settings: ControllerSettings = { totalShards: TOTAL_SHARDS, maxConcurrency: 16, leaseSeconds: 30, identifyIntervalMs: 5100, dailyIdentifyLimit: null, planner }
  const controller = new Controller(settings)
  for (let i = 0; i < NODES; i++) controller.register(0, { node_id: nodeId(i * 2), capacity: CAPACITY, ...HEALTH }, CERT)
  controller.settle()
  controller.drainEvents()
  return controller
}

function owners(controller: Controller): (string | null)[] {
  return Array.from({ length: TOTAL_SHARDS }, (_, s) => controller.ownerOf(s))
}

function moved(before: readonly (string | null)[], after: readonly (string | null)[]): number {
  let count = 0
  for (let s = 0; s < before.length; s++) if (before[s] !== after[s]) count += 1
  return count
}

/** Mean ms and mean shards moved of `change` over ROUNDS rounds (the first round is a warm-up). */
function timed(controller: Controller, change: (round: number) => void): { ms: number; moves: number } {
  let ms = 0
  let moves = 0
  for (let round = -1; round < ROUNDS; round++) {
    const before = owners(controller)
    const start = performance.now()
    change(round + 1)
    const elapsed = performance.now() - start
    controller.drainEvents()
    if (round < 0) continue
    ms += elapsed
    moves += moved(before, owners(controller))
  }
  return { ms: ms / ROUNDS, moves: moves / ROUNDS }
}

/** Prints one line per planner and change. */
export async function runPlannerBench(log: (line: string) => void): Promise<void> {
  for (const planner of ['contiguous', 'stable'] as const) {
    const controller = loaded(planner)
    // Drains spread over the fleet; joins between existing nodes (odd numbers), so they carve from neighbours.
    const drain = timed(controller, (round) => void controller.setDraining(1, nodeId(((round * 997) % NODES) * 2), true))
    const join = timed(controller, (round) => {
      const body = { node_id: nodeId(((round * 1009) % NODES) * 2 + 1), capacity: CAPACITY, ...HEALTH }
      controller.register(1, body, CERT)
      controller.settle()
    })
    const line = (what: string, r: { ms: number; moves: number }) =>
      `planner ${planner.padEnd(10)} ${what.padEnd(5)} S=${TOTAL_SHARDS} N=${NODES} cap=${CAPACITY} ${r.ms.toFixed(2).padStart(7)} ms ${r.moves.toFixed(1).padStart(8)} shards moved`
    log(line('drain', drain))
    log(line('join', join))
  }
}
