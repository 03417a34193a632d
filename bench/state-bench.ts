/**
 * What a state change costs at fleet scale (issue 11): N = 10,000 nodes of capacity 8, S = 65,536, through
 * the real service, durable writer and journaled file store on a temp dir. Main-thread cost is the event
 * loop's active time (performance.eventLoopUtilization), which excludes the fsyncs done on libuv's threads.
 * Also: a cold join of 10,000 nodes arriving at a steady rate, in controller CPU (process.cpuUsage).
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Controller, type Registration } from '../src/core/controller.js'
import type { ControllerSettings } from '../src/core/types.js'
import { ControllerService } from '../src/service/controller-service.js'
import { JournaledFileStore } from '../src/state/journaled-file-store.js'

const NODES = 10_000
const SETTINGS: ControllerSettings = { totalShards: 65_536, maxConcurrency: 16, leaseSeconds: 3600, identifyIntervalMs: 5100, dailyIdentifyLimit: 100_000 }
const HEALTH = { ready_shards: 8, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 }
const id = (i: number) => `node-${String(i).padStart(5, '0')}`
const cert = (i: number) => ({ serial: (i + 1).toString(16).padStart(4, '0'), notBefore: 0 })
const silentAudit = { record: () => undefined }
/** A check-in that reports nothing: the plan part of its answer names a node's range. */
const NOT_REGISTERED: Registration = { rotated: false, previousSerial: null }

interface Rig {
  readonly service: ControllerService
  readonly controller: Controller
  readonly store: JournaledFileStore
  readonly dir: string
  clock: number
}

async function rig(): Promise<Rig> {
  const dir = mkdtempSync(join(tmpdir(), 'pxe-state-bench-'))
  const store = new JournaledFileStore(dir)
  await store.load()
  const controller = new Controller(SETTINGS)
  const r = { controller, store, dir, clock: 1_000_000 } as Rig
  ;(r as { service: ControllerService }).service = new ControllerService(controller, { now: () => r.clock, audit: silentAudit, store })
  return r
}

/** Main-thread active ms and wall ms of `op`, which is awaited. */
async function mainThread(op: () => Promise<unknown>): Promise<{ activeMs: number; wallMs: number }> {
  const elu = performance.eventLoopUtilization()
  const start = performance.now()
  await op()
  const used = performance.eventLoopUtilization(elu)
  return { activeMs: used.active, wallMs: performance.now() - start }
}

/** Joins every node (all at once: one batch) and returns the rig at steady state. */
async function steadyRig(): Promise<Rig> {
  const r = await rig()
  await Promise.all(Array.from({ length: NODES }, (_, i) => r.service.checkIn({ node_id: id(i), capacity: 8, ...HEALTH }, cert(i))))
  return r
}

const ms = (v: number) => `${v.toFixed(2).padStart(8)} ms`

async function benchOneChange(log: (line: string) => void): Promise<void> {
  const r = await steadyRig()
  const generation = r.controller.generation
  // Warm-up: the first changes after the joins pay one-off costs (JIT compilation of the loops at this
  // size, the handoff ledger's first per-node lists, a major GC after the joins). Shown, then excluded.
  const first = await mainThread(() => r.service.setDraining(id(NODES - 2), true, 'ops', true))
  await r.service.setDraining(id(NODES - 2), false, 'ops')
  for (let k = 0; k < 3; k++) {
    r.clock += 10
    await r.service.checkIn({ node_id: id(k), capacity: 8, ...HEALTH, generation }, cert(k))
    await r.service.setDraining(id(NODES - 2), true, 'ops', true)
    await r.service.setDraining(id(NODES - 2), false, 'ops')
  }
  log(`first re-plan after the ${NODES} joins: ${ms(first.activeMs)} main-thread (one-off warm-up; 8 more changes before the samples below)`)
  /** 30 samples of `make`; `after` (not measured) undoes it where the next sample needs that. */
  const samples = async (label: string, make: (k: number) => Promise<unknown>, after?: (k: number) => Promise<unknown>) => {
    const runs: number[] = []
    for (let k = 0; k < 30; k++) {
      r.clock += 10
      runs.push((await mainThread(() => make(k))).activeMs)
      await after?.(k)
    }
    const mean = runs.reduce((sum, v) => sum + v, 0) / runs.length
    if (process.env.PXE_BENCH_SAMPLES) log(runs.map((v) => v.toFixed(1)).join(' '))
    runs.sort((a, b) => a - b)
    log(`one change at N=${NODES}: ${label.padEnd(48)} median ${ms(runs[15]!)}  mean ${ms(mean)}  worst ${ms(runs[29]!)} main-thread`)
  }
  await samples('a node reports a new generation', (k) => r.service.checkIn({ node_id: id(k), capacity: 8, ...HEALTH, generation }, cert(k)))
  await samples('an Identify grant (daily budget counted)', (k) => r.service.claimIdentify({ node_id: id(k * 16), shard_id: r.controller.checkinOutcome(id(k * 16), NOT_REGISTERED, r.clock).rangeStart }, cert(k * 16).serial).catch(() => null))
  await samples('a drain flag for a node that is not live', (k) => r.service.setDraining(`gone-${k}`, true, 'ops', true))
  await samples('a steady check-in (nothing changes: no write)', (k) => r.service.checkIn({ node_id: id(k), capacity: 8, ...HEALTH, generation }, cert(k)))
  // Re-plans. Near the end of the byte order, a drain still moves thousands of shards (every node's
  // share changes by a fraction, so the ranges after the first changed one shift): the worst case per node.
  const before = r.controller.generation
  const drain = (on: boolean) => () => r.service.setDraining(id(NODES - 2), on, 'ops', true)
  await samples('drain of a live node (re-plan)', drain(true), drain(false))
  await drain(true)()
  await samples('undrain of a live node (re-plan)', drain(false), drain(true))
  await drain(false)()
  await samples('a new node joins (re-plan)', (k) => r.service.checkIn({ node_id: `joiner-${String(k).padStart(2, '0')}`, capacity: 8, ...HEALTH }, cert(NODES + k)))
  log(`  (those re-plans made ${r.controller.generation - before} new generations; the mean includes the journal's compactions)`)
  await r.service.flushFinal()
  log(`state on disk after: state.json ${(statSync(join(r.dir, 'state.json')).size / 1e6).toFixed(2)} MB (compacted at stop)`)
  await r.store.close()
  rmSync(r.dir, { recursive: true, force: true })
}

async function benchColdJoin(log: (line: string) => void, perSecond: number): Promise<void> {
  const r = await rig()
  const cpu = process.cpuUsage()
  const elu = performance.eventLoopUtilization()
  const start = performance.now()
  const answers: Promise<unknown>[] = []
  // Arrivals at a steady rate, in 1 ms slices (what a TLS front end lets through after a restart).
  for (let i = 0; i < NODES; ) {
    const due = Math.min(NODES, Math.floor(((performance.now() - start) / 1000) * perSecond) + 1)
    for (; i < due; i++) answers.push(r.service.checkIn({ node_id: id(i), capacity: 8, ...HEALTH }, cert(i)))
    await new Promise((res) => setTimeout(res, 1))
  }
  await Promise.all(answers)
  const used = process.cpuUsage(cpu)
  const active = performance.eventLoopUtilization(elu).active
  const wall = (performance.now() - start) / 1000
  const plan = r.controller.plan(r.clock)
  log(`cold join of ${NODES} nodes at ${perSecond}/s: ${wall.toFixed(1)} s wall, controller CPU ${((used.user + used.system) / 1e6).toFixed(2)} s (main thread ${(active / 1000).toFixed(2)} s), generation ${plan.generation}, unassigned ${plan.unassigned}`)
  await r.store.close()
  rmSync(r.dir, { recursive: true, force: true })
}

/** Prints the state-change figures. */
export async function runStateBench(log: (line: string) => void): Promise<void> {
  log(`# state changes at fleet scale (node ${process.version}; targets: one change <= 5 ms main thread, cold join of 10,000 <= 10 s CPU)`)
  await benchOneChange(log)
  await benchColdJoin(log, 2000)
  await benchColdJoin(log, 10_000)
}
