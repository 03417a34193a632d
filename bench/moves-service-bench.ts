/**
 * The moves bench through the real service (issue 19 item 4): for one fleet and planner, a ControllerService
 * over the durable writer and the journaled file store on a temp dir (as src/service/service-host.ts builds
 * it), every node joined in one batch; then drains (`service.setDraining`) and joins of new nodes
 * (`service.checkIn`), each measured from the call until its answer resolves, i.e. the state it shows is
 * durable. Figures per change:
 *   - main thread: event-loop active time over that span (performance.eventLoopUtilization): the
 *     re-plan, the delta, the journal line's JSON and checksum, the answer; not the fsync, which runs on
 *     libuv's threads while the loop idles;
 *   - sync part: wall time of the call itself, up to the first await (the write started);
 *   - until durable: wall time until the answer resolved (the fsync included; on a shared disk, noisy).
 * Between two changes (not measured) the nodes that lost shards check in reporting the new generation, so
 * every change starts from a fleet with no handoff pending, as a fleet is a few seconds after a move.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Controller } from '../src/core/controller.js'
import type { PlannerName } from '../src/core/planner.js'
import type { ControllerSettings } from '../src/core/types.js'
import { ControllerService } from '../src/service/controller-service.js'
import { JournaledFileStore } from '../src/state/journaled-file-store.js'

/** One fleet of the moves bench. */
export interface MovesFleet {
  readonly nodes: number
  readonly totalShards: number
  readonly capacity: number
}

/** The spread of one change's samples (ms). */
export interface Spread {
  readonly median: number
  readonly mean: number
  readonly worst: number
}

/** What one kind of change cost through the service. */
export interface ServiceChangeFigures {
  readonly mainThread: Spread
  readonly sync: Spread
  readonly durable: Spread
  readonly moves: number
  /** Samples whose write compacted the journal into a new snapshot (the whole state: the worst ones). */
  readonly compactions: number
}

const WARM_UP = 5
const HEALTH = { ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 }
const silentAudit = { record: () => undefined }
const cert = (i: number) => ({ serial: (i + 1).toString(16).padStart(5, '0'), notBefore: 0 })

interface Rig {
  readonly service: ControllerService
  readonly controller: Controller
  readonly store: JournaledFileStore
  readonly dir: string
  readonly capacity: number
  readonly totalShards: number
  /** Node name → certificate number, for every node that ever checked in. */
  readonly certs: Map<string, number>
  clock: number
}

async function rig(planner: PlannerName, fleet: MovesFleet, nodeId: (i: number) => string): Promise<Rig> {
  const dir = mkdtempSync(join(tmpdir(), 'pxe-moves-bench-'))
  const store = new JournaledFileStore(dir)
  await store.load()
  const settings: ControllerSettings = { totalShards: fleet.totalShards, maxConcurrency: 16, leaseSeconds: 30, identifyIntervalMs: 5100, dailyIdentifyLimit: null, planner }
  const controller = new Controller(settings)
  const r: Rig = { controller, store, dir, capacity: fleet.capacity, totalShards: fleet.totalShards, certs: new Map(), clock: 1_000_000 } as unknown as Rig
  ;(r as { service: ControllerService }).service = new ControllerService(controller, { now: () => r.clock, audit: silentAudit, store })
  const joins: Promise<unknown>[] = []
  for (let i = 0; i < fleet.nodes; i++) joins.push(checkIn(r, nodeId(i * 2)))
  await Promise.all(joins)
  await releaseAll(r) // every node reports the first plan
  return r
}

function checkIn(r: Rig, nodeId: string, generation?: number): Promise<unknown> {
  let n = r.certs.get(nodeId)
  if (n === undefined) r.certs.set(nodeId, (n = r.certs.size))
  const body = { node_id: nodeId, capacity: r.capacity, ...HEALTH, ...(generation === undefined ? {} : { generation }) }
  return r.service.checkIn(body, cert(n))
}

/** Every node that checked in reports the current generation (one batch). */
async function releaseAll(r: Rig): Promise<void> {
  const generation = r.controller.generation
  await Promise.all([...r.certs.keys()].map((nodeId) => checkIn(r, nodeId, generation)))
}

function owners(r: Rig): (string | null)[] {
  return Array.from({ length: r.totalShards }, (_, s) => r.controller.ownerOf(s))
}

/** Makes one change and measures it; then the nodes it took shards from report the new generation. */
async function measured(r: Rig, change: () => Promise<unknown>): Promise<{ mainThread: number; sync: number; durable: number; moves: number; compacted: boolean }> {
  const before = owners(r)
  const journalBefore = journalBytes(r)
  r.clock += 10
  const elu = performance.eventLoopUtilization()
  const start = performance.now()
  const answer = change()
  const sync = performance.now() - start
  await answer
  const durable = performance.now() - start
  const mainThread = performance.eventLoopUtilization(elu).active
  const compacted = journalBytes(r) < journalBefore
  const after = owners(r)
  const losers = new Set<string>()
  let moves = 0
  for (let s = 0; s < before.length; s++) {
    if (before[s] === after[s]) continue
    moves += 1
    if (before[s] !== null) losers.add(before[s]!)
  }
  r.clock += 10
  const generation = r.controller.generation
  await Promise.all([...losers].map((nodeId) => checkIn(r, nodeId, generation)))
  return { mainThread, sync, durable, moves, compacted }
}

/** The journal's size: it shrinks (starts over) exactly when a write compacted it. */
function journalBytes(r: Rig): number {
  try {
    return statSync(r.store.journalPath).size
  } catch {
    return 0
  }
}

function spread(values: number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b)
  const mean = values.reduce((a, b) => a + b, 0) / values.length
  return { median: sorted[Math.floor(sorted.length / 2)]!, mean, worst: sorted[sorted.length - 1]! }
}

async function series(r: Rig, rounds: number, change: (round: number) => Promise<unknown>): Promise<ServiceChangeFigures> {
  const runs: Awaited<ReturnType<typeof measured>>[] = []
  for (let round = 0; round < rounds; round++) runs.push(await measured(r, () => change(round)))
  return {
    mainThread: spread(runs.map((x) => x.mainThread)),
    sync: spread(runs.map((x) => x.sync)),
    durable: spread(runs.map((x) => x.durable)),
    moves: runs.reduce((sum, x) => sum + x.moves, 0) / runs.length,
    compactions: runs.filter((x) => x.compacted).length,
  }
}

/**
 * One planner over one fleet through the service: `rounds` drains of distinct live nodes, then `rounds`
 * joins of new nodes between existing ones (the same nodes as the bare-Controller rounds), after
 * WARM_UP unmeasured changes of each kind (JIT, first journal lines, the GC after the joins).
 */
export async function serviceMoves(
  planner: PlannerName,
  fleet: MovesFleet,
  rounds: number,
  nodeId: (i: number) => string,
): Promise<{ drain: ServiceChangeFigures; join: ServiceChangeFigures }> {
  const r = await rig(planner, fleet, nodeId)
  try {
    const { nodes } = fleet
    // Warm-up rounds use the rounds' formulas past the measured ones, so no node is drained or joined twice.
    const drainee = (round: number) => nodeId(((round * 997) % nodes) * 2)
    const joiner = (round: number) => nodeId(((round * 1009) % nodes) * 2 + 1)
    for (let k = 0; k < WARM_UP; k++) {
      await measured(r, () => r.service.setDraining(drainee(rounds + k), true, 'bench', true))
      await measured(r, () => checkIn(r, joiner(rounds + k)))
    }
    const drain = await series(r, rounds, (round) => r.service.setDraining(drainee(round), true, 'bench', true))
    const join = await series(r, rounds, (round) => checkIn(r, joiner(round)))
    await r.service.flushFinal()
    return { drain, join }
  } finally {
    await r.store.close()
    rmSync(r.dir, { recursive: true, force: true })
  }
}
