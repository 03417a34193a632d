/**
 * New connections: full and resumed TLS 1.3 handshakes, each followed by one check-in on that connection
 * and a close, for an RSA-2048 and a P-256 server key (with node keys of the same type), against the
 * controller and the ceiling. Resumption uses the session ticket a client kept from an earlier
 * connection, as a node does after a controller restart. Prints connections per second and the server
 * CPU per connection (the whole target process over the window, divided by the connections completed).
 */
import { Connection, withTimeout, type Identity } from './mtls-client.js'
import { KEY_LABEL, type ServerKey, type Target } from './mtls-process.js'
import { measureWindow } from './mtls-checkin.js'
import { measureRenewalCost } from './renewal-cost.js'

/** Clients connecting at once (each its own node certificate, one connection at a time). */
const CLIENTS = 16
/**
 * Rounds per cell. Each controller round runs right beside the ceiling's round of the same kind (the
 * order alternating), and "vs ceiling" is the median of those paired ratios: on a shared machine a
 * round's CPU per connection varies by ±30 %, and a pair sees the same minute of it.
 */
const ROUNDS = 8
const MEASURE_MS = 1000
/** A discarded first round per cell (V8 warm-up of the connection path). */
const WARMUP_MS = 1000
/** One connection taking longer than this means a stalled target: the bench stops. */
const VISIT_TIMEOUT_MS = 10_000
/** The fleet the issue sizes the restart storm for. */
const FLEET = 10_000

type Log = (line: string) => void
type Mode = 'full' | 'resumed'

/** The clients of one server key: identities, their check-in requests, the sessions they keep. */
export interface HandshakeFleet {
  readonly key: ServerKey
  readonly controller: Target
  readonly ceiling: Target
  readonly ids: readonly Identity[]
  readonly requests: readonly Buffer[]
}

interface Cell {
  readonly fleet: HandshakeFleet
  readonly target: Target
  readonly mode: Mode
  /** Per client, the newest session this target gave it (a resumed handshake brings no new one). */
  readonly sessions: Array<Buffer | undefined>
  readonly rounds: Array<{ connections: number; seconds: number; serverCpuMicros: number; generatorCpu: number }>
}

/** One connection: handshake (resuming `session` if given), one check-in, close. */
export async function visit(target: Target, ca: Buffer, id: Identity, request: Buffer, session: Buffer | undefined): Promise<{ reused: boolean; session: Buffer | undefined }> {
  const connection = await Connection.open(target.port, ca, id, session)
  const reply = await connection.send(request)
  await connection.close()
  if (reply.status !== 200) throw new Error(`${target.kind} (${target.key}) answered ${reply.status}: ${reply.body.toString('utf8').slice(0, 200)}`)
  return { reused: connection.reused, session: connection.session }
}

/** CLIENTS closed loops of connections for `ms`; counts only what completes inside the measured window. */
async function runRound(cell: Cell, ca: Buffer, measure: boolean, ms: number): Promise<void> {
  const { target, mode, fleet } = cell
  let running = true
  let recording = false
  let connections = 0
  let failure: Error | undefined
  const loop = async (i: number) => {
    while (running) {
      const offered = mode === 'resumed' ? cell.sessions[i] : undefined
      const outcome = await withTimeout(visit(target, ca, fleet.ids[i]!, fleet.requests[i]!, offered), VISIT_TIMEOUT_MS, `${target.kind} (${target.key}): no progress for ${VISIT_TIMEOUT_MS} ms`)
      if (outcome.reused !== (mode === 'resumed')) throw new Error(`${target.kind} (${target.key}): a ${mode} handshake was expected, got ${outcome.reused ? 'a resumed' : 'a full'} one`)
      if (outcome.session) cell.sessions[i] = outcome.session
      if (recording) connections++
    }
  }
  const settled = Promise.all(Array.from({ length: CLIENTS }, (_, i) => loop(i))).catch((err: Error) => {
    failure ??= err
    running = false
  })
  if (measure) {
    const window = await measureWindow(target, ms, (on) => {
      if (on) connections = 0
      recording = on
    })
    cell.rounds.push({ connections, ...window })
  } else {
    await new Promise((r) => setTimeout(r, ms))
  }
  running = false
  await settled
  if (failure) throw failure
}

interface CellFigures {
  readonly perSecond: number
  /** The target's CPU as a share of one core: well below 1 means the load generator set the pace. */
  readonly serverCore: number
  /** Server CPU per connection, ms, over all rounds; and the lowest and highest round. */
  readonly cpuMs: number
  readonly cpuLow: number
  readonly cpuHigh: number
  readonly generatorCpu: number
}

function figures(cell: Cell): CellFigures {
  const total = cell.rounds.reduce((n, r) => n + r.connections, 0)
  const seconds = cell.rounds.reduce((n, r) => n + r.seconds, 0)
  const cpu = cell.rounds.reduce((n, r) => n + r.serverCpuMicros, 0)
  const perRound = cell.rounds.map((r) => r.serverCpuMicros / 1000 / r.connections)
  return {
    perSecond: total / seconds,
    serverCore: cpu / 1e6 / seconds,
    cpuMs: cpu / 1000 / total,
    cpuLow: Math.min(...perRound),
    cpuHigh: Math.max(...perRound),
    generatorCpu: Math.max(...cell.rounds.map((r) => r.generatorCpu)),
  }
}

const pct = (share: number): string => `${Math.round(share * 100)} %`

/** The median and quartiles of the controller/ceiling ratios of CPU per connection, round by round. */
interface PairedRatio {
  readonly median: number
  readonly low: number
  readonly high: number
}

function quantile(sorted: readonly number[], q: number): number {
  const at = (sorted.length - 1) * q
  const lo = Math.floor(at)
  return sorted[lo]! + (sorted[Math.ceil(at)]! - sorted[lo]!) * (at - lo)
}

function pairedRatio(cell: Cell, twin: Cell): PairedRatio {
  const perConn = (r: Cell['rounds'][number]) => r.serverCpuMicros / r.connections
  const ratios = cell.rounds.map((r, i) => perConn(r) / perConn(twin.rounds[i]!)).sort((a, b) => a - b)
  return { median: quantile(ratios, 0.5), low: quantile(ratios, 0.25), high: quantile(ratios, 0.75) }
}

/** The table's columns: heading, width, and whether values align right. */
const COLUMNS = [
  ['server key / node keys', 22, false],
  ['handshake', 9, false],
  ['target', 10, false],
  ['conn/s', 6, true],
  ['server', 6, true],
  ['server CPU per conn (rounds)', 28, false],
  ['per core-s', 10, true],
  ['vs ceiling', 10, true],
  ['generator', 9, true],
] as const

function line(values: readonly string[]): string {
  return `  ${values.map((v, i) => (COLUMNS[i]![2] ? v.padStart(COLUMNS[i]![1]) : v.padEnd(COLUMNS[i]![1]))).join('  ')}`
}

/** One table row: the measured rate, the server's busy share, CPU per connection, and connections per core-second. */
function row(cell: Cell, f: CellFigures, versus: PairedRatio | null): string {
  return line([
    `${KEY_LABEL[cell.fleet.key]} / ${KEY_LABEL[cell.fleet.key]}`,
    cell.mode,
    cell.target.kind,
    Math.round(f.perSecond).toLocaleString('en-US'),
    pct(f.serverCore),
    `${f.cpuMs.toFixed(2)} ms (${f.cpuLow.toFixed(2)}–${f.cpuHigh.toFixed(2)})`,
    Math.round(1000 / f.cpuMs).toLocaleString('en-US'),
    versus === null ? '' : `${versus.median.toFixed(2)}×`,
    pct(f.generatorCpu),
  ])
}

/** The ceiling's server CPU per connection (ms), full and resumed, with `ids` as clients (at least CLIENTS of them). */
export interface CeilingCosts {
  readonly fullMs: number
  readonly resumedMs: number
  /** A check-in on an open connection, arriving alone at a fleet's pace (bench/renewal-cost.ts). */
  readonly renewalMs: number
}

/**
 * Measures the ceiling alone, as the table below does (warm-up, then ROUNDS rounds of each kind): what a
 * connection costs at the least this machine can do today, so that another benchmark run at the same
 * hour can tell a slow machine from a slow controller.
 */
export async function measureCeilingCosts(ceiling: Target, ids: readonly Identity[], requests: readonly Buffer[], ca: Buffer): Promise<CeilingCosts> {
  if (ids.length < CLIENTS) throw new Error(`the ceiling measurement needs ${CLIENTS} client identities, got ${ids.length}`)
  const fleet: HandshakeFleet = { key: ceiling.key, controller: ceiling, ceiling, ids, requests }
  const sessions: Array<Buffer | undefined> = Array.from({ length: CLIENTS }, () => undefined)
  const cells: Cell[] = (['full', 'resumed'] as const).map((mode) => ({ fleet, target: ceiling, mode, sessions, rounds: [] }))
  for (const cell of cells) await runRound(cell, ca, false, WARMUP_MS)
  for (let round = 0; round < ROUNDS; round++) for (const cell of round % 2 === 0 ? cells : [...cells].reverse()) await runRound(cell, ca, true, MEASURE_MS)
  const renewalMs = await measureRenewalCost(ceiling, ca, ids.slice(0, CLIENTS), requests.slice(0, CLIENTS), { warmupMs: WARMUP_MS, rounds: ROUNDS, ms: MEASURE_MS })
  return { fullMs: figures(cells[0]!).cpuMs, resumedMs: figures(cells[1]!).cpuMs, renewalMs }
}

/** Runs every cell (server key × target × full/resumed) in rotating order and prints the table. */
export async function runHandshakeSection(log: Log, fleets: readonly HandshakeFleet[], ca: Buffer): Promise<void> {
  log(`  new connections: TLS 1.3, ${CLIENTS} clients at once, each connection = handshake + one check-in + close; ${ROUNDS} rounds of ${MEASURE_MS} ms per cell, each controller round beside the ceiling's of the same kind`)
  log(`  (server = the target's CPU as a share of one core: well below 100 % means the load generator, which pays for its own half of every handshake, set the pace; per core-s = connections one core would serve at that CPU cost)`)
  const cells: Cell[] = []
  for (const fleet of fleets) {
    for (const target of [fleet.controller, fleet.ceiling]) {
      const sessions: Array<Buffer | undefined> = Array.from({ length: CLIENTS }, () => undefined)
      for (const mode of ['full', 'resumed'] as const) cells.push({ fleet, target, mode, sessions, rounds: [] })
    }
  }
  // Full cells come first in the list, so each client holds a session before its first resumed round.
  for (const cell of cells) await runRound(cell, ca, false, WARMUP_MS)
  // A pair is a controller cell and the ceiling's cell of the same key and mode: run back to back.
  const pairs = cells.filter((c) => c.target.kind === 'controller').map((c) => [c, cells.find((d) => d.fleet === c.fleet && d.mode === c.mode && d.target.kind === 'ceiling')!] as const)
  for (let round = 0; round < ROUNDS; round++) {
    const order = [...pairs.slice(round % pairs.length), ...pairs.slice(0, round % pairs.length)]
    for (const [mine, theirs] of order) for (const cell of round % 2 === 0 ? [mine, theirs] : [theirs, mine]) await runRound(cell, ca, true, MEASURE_MS)
  }
  log(line(COLUMNS.map(([heading]) => heading)))
  const controllerCpu = new Map<string, number>()
  const ratios: string[] = []
  for (const [cell, twin] of pairs) {
    const mine = figures(cell)
    const ratio = pairedRatio(cell, twin)
    controllerCpu.set(`${cell.fleet.key}/${cell.mode}`, mine.cpuMs)
    log(row(cell, mine, ratio))
    log(row(twin, figures(twin), null))
    ratios.push(`${cell.mode} ${KEY_LABEL[cell.fleet.key]} ${ratio.median.toFixed(2)}× (quartiles ${ratio.low.toFixed(2)}–${ratio.high.toFixed(2)})`)
  }
  log(`  controller / ceiling CPU per connection, median of ${ROUNDS} paired rounds: ${ratios.join('; ')}`)
  const storm = (key: ServerKey, mode: Mode) => (((controllerCpu.get(`${key}/${mode}`) ?? Number.NaN) * FLEET) / 1000).toFixed(1)
  log(`  ${FLEET.toLocaleString('en-US')} nodes reconnecting after a restart cost the controller about ${storm('ec', 'resumed')} s of CPU (P-256, resumed), ${storm('ec', 'full')} s (P-256, full), ${storm('rsa', 'resumed')} s (RSA, resumed), ${storm('rsa', 'full')} s (RSA, full)`)
}
