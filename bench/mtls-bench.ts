/**
 * Check-ins over real mTLS: 32 keep-alive connections, each presenting its own node certificate, against
 * the controller and, alternating in the same run, against a ceiling (raw node:https + node:crypto, see
 * mtls-target.ts). Prints both throughputs, their p99 latencies and the ratio controller / ceiling.
 *
 * The load generator writes prebuilt HTTP/1.1 requests on raw TLS sockets and reads only the status line
 * and Content-Length: a generator built on node:https would cost about as much CPU as the servers and
 * would flatten the ratio towards 1. Each target runs in its own process (one core each on a 2-core box).
 */
import { fork, type ChildProcess } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import tls, { type TLSSocket } from 'node:tls'
import { fileURLToPath } from 'node:url'
import { initPki } from '../pki/init-pki.js'
import { issueBundle, issueServerCert } from '../pki/issue-certs.js'
import { BENCH_CAPACITY, BENCH_NODES, BENCH_RATE_LIMITS, benchNodeName } from './mtls-shared.js'

// Many short alternating rounds rather than a few long ones: on a shared 2-core VM the background load
// drifts, and alternation spreads that drift evenly over both targets.
const ROUNDS_PER_TARGET = 5
const WARMUP_MS = 500
const MEASURE_MS = 2000
/** A first, discarded round per target lets V8 optimise both before anything is counted. */
const JIT_WARMUP_MS = 3000
/** A round in which no request completes for this long has a stalled target: the bench stops. */
const STALL_MS = 10_000
const TARGET_RATIO = 0.6

type Log = (line: string) => void
/** What a target process serves: the controller (file store, or HA on etcd) or the ceiling. */
export type TargetKind = 'controller' | 'controller-ha' | 'ceiling'

export interface Identity {
  readonly name: string
  readonly cert: Buffer
  readonly key: Buffer
}

export interface Target {
  readonly kind: TargetKind
  readonly port: number
  readonly child: ChildProcess
}

/** One round's outcome for one target. */
export interface RoundResult {
  readonly completed: number
  /** Every check-in answered in the round, the warm-up included (for CPU per check-in around the round). */
  readonly total: number
  readonly seconds: number
  readonly latenciesMs: Float64Array
  /** CPU the load generator itself used, as a share of one core: near 1.0 would mean it is the bottleneck. */
  readonly generatorCpu: number
}

/** The request bytes a node sends on every check-in. */
export function checkinRequest(name: string, generation: number | undefined): Buffer {
  const body = JSON.stringify({ node_id: name, capacity: BENCH_CAPACITY, ready_shards: 32, starting_shards: 0, backoff_shards: 0, fatal_shards: 0, ...(generation === undefined ? {} : { generation }) })
  return Buffer.from(`POST /v1/checkin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, 'latin1')
}

const HEADER_END = Buffer.from('\r\n\r\n', 'latin1')
const CONTENT_LENGTH = /\r\ncontent-length:\s*(\d+)/i

/** A keep-alive connection with one request in flight at a time (a closed loop, as a node behaves). */
class Connection {
  private buffer: Buffer = Buffer.alloc(0)
  private sentAt = 0
  private waiting: { resolve(reply: { status: number; body: Buffer }): void; reject(err: Error): void } | undefined
  private failure: Error | undefined

  constructor(readonly socket: TLSSocket) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk))
    socket.on('error', (err: Error) => this.fail(err))
    socket.on('close', () => this.fail(new Error('connection closed by the server')))
  }

  /** A request in flight on a dead connection fails instead of hanging the round. */
  private fail(err: Error): void {
    this.failure ??= err
    const waiter = this.waiting
    this.waiting = undefined
    waiter?.reject(this.failure)
  }

  static open(port: number, ca: Buffer, id: Identity): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = tls.connect({ host: '127.0.0.1', port, ca, cert: id.cert, key: id.key })
      socket.setNoDelay(true)
      socket.once('secureConnect', () => {
        socket.removeListener('error', reject)
        resolve(new Connection(socket))
      })
      socket.once('error', reject)
    })
  }

  /** Sends one request and resolves with the status and body (and the latency in ms). */
  send(request: Buffer): Promise<{ status: number; body: Buffer; ms: number }> {
    if (this.failure) return Promise.reject(this.failure)
    return new Promise((resolve, reject) => {
      this.sentAt = performance.now()
      this.waiting = { resolve: ({ status, body }) => resolve({ status, body, ms: performance.now() - this.sentAt }), reject }
      this.socket.write(request)
    })
  }

  private onData(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk])
    const headerEnd = this.buffer.indexOf(HEADER_END)
    if (headerEnd < 0) return
    const head = this.buffer.toString('latin1', 0, headerEnd)
    const length = CONTENT_LENGTH.exec(head)
    if (!length) {
      this.fail(new Error(`response without Content-Length: ${head.split('\r\n')[0]}`))
      this.socket.destroy()
      return
    }
    const end = headerEnd + HEADER_END.length + Number(length[1])
    if (this.buffer.length < end) return
    const body = this.buffer.subarray(headerEnd + HEADER_END.length, end)
    this.buffer = this.buffer.subarray(end)
    const waiter = this.waiting
    this.waiting = undefined
    waiter?.resolve({ status: Number(head.slice(9, 12)), body })
  }
}

/** Starts a target process and waits for its port (`args`: more arguments, e.g. the HA config file). */
export function startTarget(kind: TargetKind, root: string, args: readonly string[] = []): Promise<Target> {
  const entry = fileURLToPath(new URL('./mtls-target.js', import.meta.url))
  // stdout (the controller's pino info lines) is discarded; stderr stays visible for failures.
  const child = fork(entry, [kind, root, ...args], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  return new Promise((resolve, reject) => {
    child.once('message', (msg: { port: number }) => resolve({ kind, port: msg.port, child }))
    child.once('exit', (code) => reject(new Error(`${kind} target exited with code ${code} before listening`)))
  })
}

export function stopTarget(target: Target): Promise<void> {
  return new Promise((resolve) => {
    if (target.child.exitCode !== null) return resolve()
    target.child.once('exit', () => resolve())
    target.child.disconnect()
  })
}

function openAll(target: Target, ca: Buffer, ids: readonly Identity[]): Promise<Connection[]> {
  return Promise.all(ids.map((id) => Connection.open(target.port, ca, id)))
}

function closeAll(connections: readonly Connection[]): void {
  for (const c of connections) c.socket.destroy()
}

/** Every node checks in once, one after another, so the plan settles; returns the final generation. */
export async function joinAll(target: Target, ca: Buffer, ids: readonly Identity[]): Promise<number> {
  const connections = await openAll(target, ca, ids)
  try {
    let generation = 0
    for (const pass of [0, 1]) {
      for (const [i, id] of ids.entries()) {
        const reply = await connections[i]!.send(checkinRequest(id.name, pass === 0 ? undefined : generation))
        if (reply.status !== 200) throw new Error(`${target.kind}: join check-in of ${id.name} answered ${reply.status}: ${reply.body.toString('utf8')}`)
        generation = (JSON.parse(reply.body.toString('utf8')) as { generation: number }).generation
      }
    }
    return generation
  } finally {
    closeAll(connections)
  }
}

/**
 * One round: fresh connections (handshakes not timed), a warm-up, then MEASURE_MS of closed-loop check-ins;
 * `requests[i]` is what connection i sends, its buffers in turn.
 */
export async function runRound(target: Target, ca: Buffer, ids: readonly Identity[], requests: readonly (Buffer | readonly Buffer[])[], warmupMs = WARMUP_MS): Promise<RoundResult> {
  const connections = await openAll(target, ca, ids)
  const latencies: number[] = []
  let total = 0
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
  const loops = connections.map(async (connection, i) => {
    const mine = requests[i]!
    const turns = Buffer.isBuffer(mine) ? [mine] : mine
    for (let n = 0; running; n++) {
      const reply = await connection.send(turns[n % turns.length]!)
      lastProgress = performance.now()
      total += 1
      if (reply.status !== 200) {
        failure ??= new Error(`${target.kind} answered ${reply.status}: ${reply.body.toString('utf8').slice(0, 200)}`)
        running = false
      }
      if (recording) latencies.push(reply.ms)
    }
  })
  const settled = Promise.all(loops).catch((err: Error) => {
    failure ??= err
    running = false
  })
  await new Promise((r) => setTimeout(r, warmupMs))
  latencies.length = 0
  recording = true
  const start = performance.now()
  const cpuStart = process.cpuUsage()
  await new Promise((r) => setTimeout(r, MEASURE_MS))
  recording = false
  const completed = latencies.length
  const seconds = (performance.now() - start) / 1000
  const cpu = process.cpuUsage(cpuStart)
  running = false
  await settled
  clearInterval(watchdog)
  closeAll(connections)
  if (failure) throw failure
  return { completed, total, seconds, latenciesMs: Float64Array.from(latencies.slice(0, completed)), generatorCpu: (cpu.user + cpu.system) / 1e6 / seconds }
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}

export interface Summary {
  readonly perSecond: number
  readonly p50: number
  readonly p99: number
}

export function summarize(rounds: readonly RoundResult[]): Summary {
  const completed = rounds.reduce((n, r) => n + r.completed, 0)
  const seconds = rounds.reduce((n, r) => n + r.seconds, 0)
  const all = new Float64Array(completed)
  let offset = 0
  for (const r of rounds) {
    all.set(r.latenciesMs, offset)
    offset += r.latenciesMs.length
  }
  all.sort()
  return { perSecond: completed / seconds, p50: percentile(all, 50), p99: percentile(all, 99) }
}

export const fmtRate = (perSecond: number): string => `${Math.round(perSecond).toLocaleString('en-US').padStart(7)} check-ins/s`
export const fmtMs = (ms: number): string => `${ms.toFixed(2).padStart(6)} ms`

/** Makes a throw-away PKI under `<root>/pki` and the bench's node certificates with our toolkit. */
export async function makeBenchPki(root: string, log: Log): Promise<{ ids: Identity[]; ca: Buffer }> {
  const pkiDir = join(root, 'pki')
  log(`  making a PKI and ${BENCH_NODES} node certificates with pki/…`)
  await initPki(pkiDir)
  await issueServerCert(pkiDir, { dns: ['localhost'], ip: ['127.0.0.1'] })
  const ids: Identity[] = []
  for (let i = 0; i < BENCH_NODES; i++) {
    const name = benchNodeName(i)
    const { bundleDir } = await issueBundle(pkiDir, name, 'node')
    ids.push({ name, cert: await readFile(join(bundleDir, 'cert.pem')), key: await readFile(join(bundleDir, 'key.pem')) })
  }
  return { ids, ca: await readFile(join(pkiDir, 'ca.pem')) }
}

/** Makes the PKI and 32 node bundles with our toolkit, runs the alternating rounds, prints the figures. */
export async function runMtlsBench(log: Log): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'pxe-mtls-bench-'))
  const targets: Target[] = []
  try {
    log(`mTLS check-in bench: ${BENCH_NODES} keep-alive connections, ${BENCH_NODES} distinct node certificates, 127.0.0.1`)
    const limit = BENCH_RATE_LIMITS.node
    log(`  rate limits configured out of the way: ${limit.per_second.toLocaleString('en-US')}/s, burst ${limit.burst.toLocaleString('en-US')} per certificate (checked on every request, never refusing); metrics on, as in production`)
    const { ids, ca } = await makeBenchPki(root, log)

    const controller = await startTarget('controller', root)
    targets.push(controller)
    const ceiling = await startTarget('ceiling', root)
    targets.push(ceiling)

    // The controller's steady state: every node has joined and reports the generation it was given,
    // so check-ins change nothing and write nothing (as in production between rebalances).
    const generation = await joinAll(controller, ca, ids)
    const requests = ids.map((id) => checkinRequest(id.name, generation))
    log(`  ${BENCH_NODES} nodes joined the controller (generation ${generation}); a discarded warm-up round each, then ${ROUNDS_PER_TARGET} alternating rounds per target of ${MEASURE_MS} ms measured`)
    for (const target of [controller, ceiling]) await runRound(target, ca, ids, requests, JIT_WARMUP_MS)

    const results = { controller: [] as RoundResult[], ceiling: [] as RoundResult[] }
    for (let round = 1; round <= ROUNDS_PER_TARGET; round++) {
      // The order flips every round, so neither target always runs right after the other.
      for (const target of round % 2 === 1 ? [controller, ceiling] : [ceiling, controller]) {
        const result = await runRound(target, ca, ids, requests)
        ;(target === controller ? results.controller : results.ceiling).push(result)
        const s = summarize([result])
        log(`  round ${round}/${ROUNDS_PER_TARGET} ${target.kind.padEnd(10)} ${fmtRate(s.perSecond)}  p99 ${fmtMs(s.p99)}  (load generator ${Math.round(result.generatorCpu * 100)} % of a core)`)
      }
    }
    const c = summarize(results.controller)
    const r = summarize(results.ceiling)
    log(`  controller (fastify + jose)       ${fmtRate(c.perSecond)}  p50 ${fmtMs(c.p50)}  p99 ${fmtMs(c.p99)}`)
    log(`  ceiling (node:https + node:crypto) ${fmtRate(r.perSecond)}  p50 ${fmtMs(r.p50)}  p99 ${fmtMs(r.p99)}`)
    // Each controller round against the ceiling round right after it: the spread shows how much of
    // the figure is the machine's background noise.
    const paired = results.controller.map((round, i) => round.completed / round.seconds / (results.ceiling[i]!.completed / results.ceiling[i]!.seconds))
    const ratio = c.perSecond / r.perSecond
    const verdict = ratio >= TARGET_RATIO ? 'meets' : 'BELOW'
    log(`  ratio controller / ceiling: ${ratio.toFixed(2)} (${verdict} the target ≥ ${TARGET_RATIO.toFixed(2)}; round by round ${Math.min(...paired).toFixed(2)}–${Math.max(...paired).toFixed(2)})`)
  } finally {
    await Promise.all(targets.map(stopTarget))
    await rm(root, { recursive: true, force: true }) // the bench's private keys do not outlive it
  }
}
