/**
 * Check-ins on keep-alive connections: 32 connections per target, each presenting its own node certificate,
 * against the controller and the ceiling (mtls-target.ts). After a discarded warm-up round per target,
 * the load alternates between the two targets in short slices on connections that stay open: each slice
 * drains its requests before the next starts, and each target's CPU is read at both ends of its slice. On
 * a shared VM the background load drifts within seconds; short alternating slices put both targets under
 * the same drift, and the median of the slice-by-slice ratios shrugs off the bursts that remain. Prints per
 * target the throughput, p50/p99 latency and server CPU per check-in (the whole target process, every
 * thread), and the ratios controller / ceiling: over all slices, and the median of paired slices.
 */
import { closeAll, openAll, type Connection, type Identity } from './mtls-client.js'
import type { Target } from './mtls-process.js'

/** Measured slices per target, and their length; the first WARMUP_SLICES pairs are discarded. */
const SLICES_PER_TARGET = 40
const SLICE_MS = 250
const WARMUP_SLICES = 6
const WARMUP_MS = 500
const MEASURE_MS = 2000
/** A first, discarded round per target lets V8 optimise both before anything is counted. */
const JIT_WARMUP_MS = 3000
/** A round in which no request completes for this long has a stalled target: the bench stops. */
const STALL_MS = 10_000
/** The targets: throughput at least 0.6 of the ceiling's, CPU per check-in at most 1.3 times. */
const TARGET_THROUGHPUT_RATIO = 0.6
const TARGET_CPU_RATIO = 1.3

type Log = (line: string) => void

/** One round's outcome for one target. */
export interface RoundResult {
  readonly completed: number
  readonly seconds: number
  readonly latenciesMs: Float64Array
  /** The target process's CPU over the window, in µs (all threads). */
  readonly serverCpuMicros: number
  /** CPU the load generator itself used, as a share of one core: near 1.0 would mean it is the bottleneck. */
  readonly generatorCpu: number
}

/** Every node checks in, all at once, then again reporting the generation it was given, so the plan settles; returns the final generation. */
export async function joinAll(target: Target, ca: Buffer, ids: readonly Identity[], request: (id: Identity, generation: number | undefined) => Buffer): Promise<number> {
  const connections = await openAll(target.port, ca, ids)
  try {
    // Every node at once, as a fleet joins: one after another, the last connections would wait for the
    // controller's re-plans (spaced 250 ms apart) longer than the 5 s it gives a first request, and be closed.
    let generation = 0
    for (const pass of [0, 1]) {
      const sent = pass === 0 ? undefined : generation
      const replies = await Promise.all(ids.map((id, i) => connections[i]!.send(request(id, sent))))
      for (const [i, reply] of replies.entries()) {
        if (reply.status !== 200) throw new Error(`${target.kind}: join check-in of ${ids[i]!.name} answered ${reply.status}: ${reply.body.toString('utf8')}`)
        generation = Math.max(generation, (JSON.parse(reply.body.toString('utf8')) as { generation: number }).generation)
      }
    }
    return generation
  } finally {
    closeAll(connections)
  }
}

/**
 * Measures `MEASURE_MS` of work while `recording` is on: the window opens when the target's first CPU
 * reading arrives and closes when its second arrives, so the CPU and the count cover the same span.
 */
export async function measureWindow(target: Target, ms: number, recording: (on: boolean) => void): Promise<{ seconds: number; serverCpuMicros: number; generatorCpu: number }> {
  const cpuStart = await target.cpuMicros()
  recording(true)
  const start = performance.now()
  const ownStart = process.cpuUsage()
  await new Promise((r) => setTimeout(r, ms))
  const cpuEnd = await target.cpuMicros()
  recording(false)
  const seconds = (performance.now() - start) / 1000
  const own = process.cpuUsage(ownStart)
  return { seconds, serverCpuMicros: cpuEnd - cpuStart, generatorCpu: (own.user + own.system) / 1e6 / seconds }
}

/**
 * One round: fresh connections (handshakes not timed), a warm-up, then MEASURE_MS of closed-loop check-ins.
 * Each connection sends `requests[i]` again and again, or with `vary` the body it returns for the
 * connection's identity and the number of requests it sent so far (a load that changes state).
 */
export async function runRound(target: Target, ca: Buffer, ids: readonly Identity[], requests: readonly Buffer[], warmupMs = WARMUP_MS, vary?: (id: Identity, sent: number) => Buffer): Promise<RoundResult> {
  const connections = await openAll(target.port, ca, ids)
  const latencies: number[] = []
  let recording = false
  let running = true
  let failure: Error | undefined
  let lastProgress = performance.now()
  const watchdog = setInterval(() => {
    if (performance.now() - lastProgress < STALL_MS) return
    failure ??= new Error(`${target.kind}: no answer for ${STALL_MS} ms`)
    running = false
    closeAll(connections) // fails the requests in flight, so the loops end
  }, 500)
  const loop = async (connection: Connection, request: Buffer, id: Identity) => {
    for (let sent = 0; running; sent++) {
      const reply = await connection.send(vary ? vary(id, sent) : request)
      lastProgress = performance.now()
      if (reply.status !== 200) {
        failure ??= new Error(`${target.kind} answered ${reply.status}: ${reply.body.toString('utf8').slice(0, 200)}`)
        running = false
      }
      if (recording) latencies.push(reply.ms)
    }
  }
  const settled = Promise.all(connections.map((c, i) => loop(c, requests[i]!, ids[i]!))).catch((err: Error) => {
    failure ??= err
    running = false
  })
  await new Promise((r) => setTimeout(r, warmupMs))
  const window = await measureWindow(target, MEASURE_MS, (on) => {
    if (on) latencies.length = 0
    recording = on
  })
  const completed = latencies.length
  running = false
  await settled
  clearInterval(watchdog)
  closeAll(connections)
  if (failure) throw failure
  return { completed, latenciesMs: Float64Array.from(latencies.slice(0, completed)), ...window }
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}

export interface Summary {
  readonly perSecond: number
  readonly p50: number
  readonly p99: number
  /** Server CPU per check-in, µs. */
  readonly cpuPerCheckin: number
}

export function summarize(rounds: readonly RoundResult[]): Summary {
  const completed = rounds.reduce((n, r) => n + r.completed, 0)
  const seconds = rounds.reduce((n, r) => n + r.seconds, 0)
  const cpu = rounds.reduce((n, r) => n + r.serverCpuMicros, 0)
  const all = new Float64Array(completed)
  let offset = 0
  for (const r of rounds) {
    all.set(r.latenciesMs, offset)
    offset += r.latenciesMs.length
  }
  all.sort()
  return { perSecond: completed / seconds, p50: percentile(all, 50), p99: percentile(all, 99), cpuPerCheckin: cpu / completed }
}

export const fmtRate = (perSecond: number): string => `${Math.round(perSecond).toLocaleString('en-US').padStart(7)} check-ins/s`
export const fmtMs = (ms: number): string => `${ms.toFixed(2).padStart(6)} ms`
const fmtCpu = (micros: number): string => `${micros.toFixed(0).padStart(4)} µs CPU/check-in`

/**
 * One slice: closed-loop check-ins on open connections for `ms`, then every request in flight finishes;
 * the target's CPU is read at both ends.
 */
async function runSlice(target: Target, connections: readonly Connection[], requests: readonly Buffer[], ms: number): Promise<RoundResult> {
  const latencies: number[] = []
  let running = true
  const cpuStart = await target.cpuMicros()
  const ownStart = process.cpuUsage()
  const start = performance.now()
  const timer = setTimeout(() => (running = false), ms)
  const stalled = setTimeout(() => connections.forEach((c) => c.socket.destroy(new Error(`${target.kind}: no answer for ${STALL_MS} ms`))), STALL_MS)
  try {
    await Promise.all(
      connections.map(async (connection, i) => {
        while (running) {
          const reply = await connection.send(requests[i]!)
          if (reply.status !== 200) throw new Error(`${target.kind} answered ${reply.status}: ${reply.body.toString('utf8').slice(0, 200)}`)
          latencies.push(reply.ms)
        }
      }),
    )
  } finally {
    clearTimeout(timer)
    clearTimeout(stalled)
  }
  const seconds = (performance.now() - start) / 1000
  const cpuEnd = await target.cpuMicros()
  const own = process.cpuUsage(ownStart)
  return { completed: latencies.length, seconds, latenciesMs: Float64Array.from(latencies), serverCpuMicros: cpuEnd - cpuStart, generatorCpu: (own.user + own.system) / 1e6 / seconds }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

/** Warms both targets up, runs the interleaved slices and prints every figure. */
export async function runCheckinSection(log: Log, controller: Target, ceiling: Target, ca: Buffer, ids: readonly Identity[], requests: readonly Buffer[]): Promise<void> {
  log(`  check-ins on ${ids.length} keep-alive connections per target: a discarded warm-up round each, then ${SLICES_PER_TARGET} slices of ${SLICE_MS} ms per target, alternating (after ${WARMUP_SLICES} discarded pairs)`)
  for (const target of [controller, ceiling]) await runRound(target, ca, ids, requests, JIT_WARMUP_MS)
  const targets = [controller, ceiling] as const
  const connections = await Promise.all(targets.map((t) => openAll(t.port, ca, ids)))
  const slices: RoundResult[][] = [[], []]
  try {
    for (let pair = 0; pair < WARMUP_SLICES + SLICES_PER_TARGET; pair++) {
      // The order flips every pair, so neither target always runs right after the other.
      for (const t of pair % 2 === 0 ? [0, 1] : [1, 0]) {
        const slice = await runSlice(targets[t]!, connections[t]!, requests, SLICE_MS)
        if (pair >= WARMUP_SLICES) slices[t]!.push(slice)
      }
    }
  } finally {
    connections.forEach(closeAll)
  }
  const [c, r] = slices.map(summarize) as [Summary, Summary]
  log(`  controller (fastify)               ${fmtRate(c.perSecond)}  p50 ${fmtMs(c.p50)}  p99 ${fmtMs(c.p99)}  ${fmtCpu(c.cpuPerCheckin)}`)
  log(`  ceiling (node:https + node:crypto) ${fmtRate(r.perSecond)}  p50 ${fmtMs(r.p50)}  p99 ${fmtMs(r.p99)}  ${fmtCpu(r.cpuPerCheckin)}`)
  const cpuPer = (s: RoundResult) => s.serverCpuMicros / s.completed
  const rate = (s: RoundResult) => s.completed / s.seconds
  const paired = (f: (s: RoundResult) => number) => slices[0]!.map((s, i) => f(s) / f(slices[1]![i]!))
  const quartiles = (values: readonly number[]) => {
    const sorted = [...values].sort((a, b) => a - b)
    return `${sorted[Math.floor(sorted.length / 4)]!.toFixed(2)}–${sorted[Math.floor((sorted.length * 3) / 4)]!.toFixed(2)}`
  }
  const cpuPairs = paired(cpuPer)
  const cpuRatio = median(cpuPairs)
  const cpuVerdict = cpuRatio <= TARGET_CPU_RATIO ? 'meets' : 'ABOVE'
  log(`  CPU per check-in, controller / ceiling: ${cpuRatio.toFixed(2)} median of ${cpuPairs.length} paired slices (${cpuVerdict} the target ≤ ${TARGET_CPU_RATIO.toFixed(2)}; quartiles ${quartiles(cpuPairs)}; over all slices ${(c.cpuPerCheckin / r.cpuPerCheckin).toFixed(2)}; per target, median slice ${median(slices[0]!.map(cpuPer)).toFixed(0)} / ${median(slices[1]!.map(cpuPer)).toFixed(0)} µs)`)
  const ratePairs = paired(rate)
  const ratio = median(ratePairs)
  const verdict = ratio >= TARGET_THROUGHPUT_RATIO ? 'meets' : 'BELOW'
  log(`  throughput, controller / ceiling:       ${ratio.toFixed(2)} median of paired slices (${verdict} the target ≥ ${TARGET_THROUGHPUT_RATIO.toFixed(2)}; quartiles ${quartiles(ratePairs)}; over all slices ${(c.perSecond / r.perSecond).toFixed(2)})`)
}
