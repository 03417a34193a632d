/**
 * `npm run bench -- --only rest [--minutes M]` (issue 61 point 4): the REST-budget scenario, first the
 * control run (four independent @discordjs/rest clients) and then the product run (a real controller
 * child process, four node agents with their REST proxies), each M minutes long (default 3) on its own
 * gateway emulator; prints both side by side. A progress line goes to stderr every 10 s.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startProductController } from './product-controller.js'
import { reportLines } from './report.js'
import { runControl, runProduct } from './runs.js'
import { SCENARIO_BOTS, scheduleFor } from './schedule.js'
import { IN_FLIGHT_SECONDS } from './load-bot.js'

type Log = (line: string) => void

/** The bench's lease: check-ins every ~3 s carry the demand and the shares. */
export const BENCH_LEASE_SECONDS = 9
/** Skipped after each change before figures count (at most half of the shortest phase, a quarter of the run). */
const SETTLE_MS = 15_000
/** Runs shorter than this cannot settle after each change (the test runs shorter ones itself). */
export const MIN_BENCH_MINUTES = 1

/** Reads `--minutes` (a positive number, default 3); throws a RangeError naming the problem. */
export function parseMinutes(value: string | undefined): number {
  if (value === undefined) return 3
  const minutes = Number(value)
  if (!/^\d+(\.\d+)?$/.test(value) || !(minutes >= MIN_BENCH_MINUTES) || minutes > 60) throw new RangeError(`--minutes must be a number from ${MIN_BENCH_MINUTES} to 60, got "${value.slice(0, 20)}"`)
  return minutes
}

/**
 * PXE_BENCH_REST_IN_FLIGHT_S: the bots' in-flight bound in seconds of their demand (default 2); 10 (the
 * proxy's longest hold) makes the hungry bot outrun its proxy's queue, which answers 429 itself.
 */
export function inFlightSecondsFrom(value: string | undefined): number {
  if (value === undefined || value === '') return IN_FLIGHT_SECONDS
  const seconds = Number(value)
  if (!/^\d+(\.\d+)?$/.test(value) || !(seconds >= 0.1) || seconds > 60) throw new RangeError(`PXE_BENCH_REST_IN_FLIGHT_S must be a number of seconds from 0.1 to 60, got "${value.slice(0, 20)}"`)
  return seconds
}

/** Runs the `rest` section. */
export async function runRestBench(log: Log, minutes = 3): Promise<void> {
  const progress = (line: string) => void process.stderr.write(`${line}\n`)
  let inFlightSeconds: number
  try {
    inFlightSeconds = inFlightSecondsFrom(process.env.PXE_BENCH_REST_IN_FLIGHT_S)
  } catch (err) {
    process.stderr.write(`bench: ${(err as Error).message}\n`)
    process.exitCode = 2
    return
  }
  const schedule = scheduleFor(minutes * 60_000, Math.min(SETTLE_MS, (minutes * 60_000) / 8))
  log(`REST budget bench: ${minutes} min per run, the control first, then the product (progress on stderr); each bot holds up to ${inFlightSeconds} s of its demand in flight`)
  const control = await runControl(schedule, progress, undefined, inFlightSeconds)
  const root = await mkdtemp(join(tmpdir(), 'pxe-rest-bench-'))
  try {
    const names = [...SCENARIO_BOTS.start.map((b) => b.name), SCENARIO_BOTS.joins.name]
    const controller = await startProductController(root, names, BENCH_LEASE_SECONDS, progress)
    try {
      const product = await runProduct(schedule, { controllers: controller.urls, identities: controller.identities, identifyIntervalMs: 5000, inFlightSeconds }, progress)
      for (const line of reportLines(product.figures, control.figures, { leaseSeconds: BENCH_LEASE_SECONDS, settleS: schedule.settleMs / 1000 })) log(line)
      await Promise.all([control.record.settled, product.record.settled])
    } finally {
      await controller.stop()
    }
  } finally {
    await rm(root, { recursive: true, force: true }) // it holds the node keys
  }
}
