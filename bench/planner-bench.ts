/**
 * `npm run bench -- --only moves` (alias `planner`): one drain and one join under each planner (SPEC
 * "Planner choice") for the fleets of issue 19 — N = 100 / 1,000 / 10,000 nodes, S = 1,024 / 16,384 /
 * 65,536, capacity 16 / 32 / 8: main-thread ms per re-plan through the bare Controller (planner, owner
 * table, diff, handoffs) and the shards that changed owner; then the same changes through the real
 * service and journaled file store until the answer is durable (moves-service-bench.ts).
 */
import { Controller } from '../src/core/controller.js'
import type { PlannerName } from '../src/core/planner.js'
import type { ControllerSettings } from '../src/core/types.js'
import { serviceMoves, type ServiceChangeFigures, type Spread } from './moves-service-bench.js'

/** The fleets measured: nodes, total shards, capacity of each node. */
const FLEETS = [
  { nodes: 100, totalShards: 1024, capacity: 16 },
  { nodes: 1000, totalShards: 16_384, capacity: 32 },
  { nodes: 10_000, totalShards: 65_536, capacity: 8 },
] as const
type Fleet = (typeof FLEETS)[number]
const ROUNDS = 20
const CERT = { serial: 'ab', notBefore: 0 }
const HEALTH = { ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 }

const nodeId = (i: number) => `node-${String(i).padStart(5, '0')}`

/** Every node registered at time 0 and planned once (the same layout under both planners). */
function loaded(planner: PlannerName, fleet: Fleet): Controller {
  const settings: ControllerSettings = { totalShards: fleet.totalShards, maxConcurrency: 16, leaseSeconds: 30, identifyIntervalMs: 5100, dailyIdentifyLimit: null, planner }
  const controller = new Controller(settings)
  for (let i = 0; i < fleet.nodes; i++) controller.register(0, { node_id: nodeId(i * 2), capacity: fleet.capacity, ...HEALTH }, CERT)
  controller.settle()
  controller.drainEvents()
  return controller
}

function owners(controller: Controller, totalShards: number): (string | null)[] {
  return Array.from({ length: totalShards }, (_, s) => controller.ownerOf(s))
}

function moved(before: readonly (string | null)[], after: readonly (string | null)[]): number {
  let count = 0
  for (let s = 0; s < before.length; s++) if (before[s] !== after[s]) count += 1
  return count
}

/** Mean ms and mean shards moved of `change` over ROUNDS rounds (the first round is a warm-up). */
function timed(controller: Controller, totalShards: number, change: (round: number) => void): { ms: number; moves: number } {
  let ms = 0
  let moves = 0
  for (let round = -1; round < ROUNDS; round++) {
    const before = owners(controller, totalShards)
    const start = performance.now()
    change(round + 1)
    const elapsed = performance.now() - start
    controller.drainEvents()
    if (round < 0) continue
    ms += elapsed
    moves += moved(before, owners(controller, totalShards))
  }
  return { ms: ms / ROUNDS, moves: moves / ROUNDS }
}

const fleetLabel = ({ nodes, totalShards, capacity }: Fleet) => `N=${String(nodes).padEnd(6)} S=${String(totalShards).padEnd(6)} cap=${String(capacity).padEnd(3)}`
const ms = (v: number, width = 6) => v.toFixed(2).padStart(width)
const spreadText = (s: Spread) => `median ${ms(s.median)}  mean ${ms(s.mean)}  worst ${ms(s.worst)} ms`

function serviceLine(planner: PlannerName, what: string, fleet: Fleet, f: ServiceChangeFigures): string {
  const compacted = `${f.compactions} of ${ROUNDS} compacted the journal`
  return `service ${planner.padEnd(10)} ${what.padEnd(5)} ${fleetLabel(fleet)} main thread ${spreadText(f.mainThread)}; sync part median ${ms(f.sync.median, 5)} ms; until durable median ${ms(f.durable.median, 5)} ms wall; ${f.moves.toFixed(1)} shards moved, ${compacted}`
}

/** Prints one line per fleet, planner and change: the bare Controller's re-plan, then the service's. */
export async function runPlannerBench(log: (line: string) => void): Promise<void> {
  log(`# moves by planner (node ${process.version}; mean of ${ROUNDS} rounds; service lines: main-thread event-loop active time from the call until the answer is durable, target <= 5 ms at N=10,000)`)
  for (const fleet of FLEETS) {
    const { nodes, totalShards, capacity } = fleet
    for (const planner of ['contiguous', 'stable'] as const) {
      const controller = loaded(planner, fleet)
      // Drains spread over the fleet; joins between existing nodes (odd numbers), so they carve from neighbours.
      const drain = timed(controller, totalShards, (round) => void controller.setDraining(1, nodeId(((round * 997) % nodes) * 2), true, true))
      const join = timed(controller, totalShards, (round) => {
        const body = { node_id: nodeId(((round * 1009) % nodes) * 2 + 1), capacity, ...HEALTH }
        controller.register(1, body, CERT)
        controller.settle()
      })
      const line = (what: string, r: { ms: number; moves: number }) =>
        `planner ${planner.padEnd(10)} ${what.padEnd(5)} ${fleetLabel(fleet)} ${r.ms.toFixed(2).padStart(7)} ms ${r.moves.toFixed(1).padStart(8)} shards moved`
      log(line('drain', drain))
      log(line('join', join))
    }
    for (const planner of ['contiguous', 'stable'] as const) {
      const service = await serviceMoves(planner, fleet, ROUNDS, nodeId)
      log(serviceLine(planner, 'drain', fleet, service.drain))
      log(serviceLine(planner, 'join', fleet, service.join))
    }
  }
}
