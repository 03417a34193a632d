/**
 * The fleet benchmark (issue 12 item 5): N light nodes (light-node.ts) in load-generator processes against
 * the real controller in a child process. Phases: (a) cold join from an empty state, (c) a steady-state
 * window, (b) kill -9 of the steady controller and a start on the same state, then a second steady
 * window (the one profiled with --cpu-prof, together with the restart), then (d) a drain of --drain nodes
 * with session handoff (drain-phase.ts), on the same restarted controller (profiled too).
 *
 * With --ha the control plane is two replicas on etcd (ha-side.ts) and phase (b) is a take-over: kill -9
 * of the leader, the other replica takes over, the killed one starts again as a follower. The drain then
 * also counts etcd's writes and the leader's main-thread CPU over the drain requests.
 */
import { rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { ControllerChild } from '../controller-process.js'
import { controllerFiles, makeFleetPki, reuseFleetPki, type FleetPki } from '../fleet-pki.js'
import { onInterrupt } from '../interrupt.js'
import { OperatorClient } from '../operator-client.js'
import { nodeName } from '../scenario.js'
import { sharedNow } from '../shared-clock.js'
import type { BenchOptions } from './bench-options.js'
import { ceilingCosts, type CeilingCosts } from './ceiling-costs.js'
import { drainPhase, type DrainFigures } from './drain-phase.js'
import { countersSince, openHaSide, type EtcdCounters, type HaSide } from './ha-side.js'
import { LoadPool } from './load-pool.js'
import { LAG_BUCKET_MS, medianOfBuckets, type AnsweredTally, type LoadNodeSpec, type LoadStatus, type LoopDelay } from './load-protocol.js'
import { loadAverage, mainThreadSchedSeconds, sampleProcess, type ProcSample } from './proc-stats.js'
import { summarizeProfile, type ProfileSummary } from './profile-summary.js'

/** Every figure of a run. */
export interface BenchFigures {
  readonly options: BenchOptions
  readonly loadAverage: { readonly start: number; readonly end: number }
  /** What a connection cost at the ceiling just before this run (null with --no-ceiling). */
  readonly ceiling: CeilingCosts | null
  readonly coldJoin: {
    readonly allJoinedS: number
    readonly stableS: number
    readonly generation: number | null
    readonly controllerCpuS: number
    /** Main-thread time the controller spent in operations that re-planned (pxe_replan_duration_seconds; null: not read). */
    readonly replanS: number | null
    readonly rssMiB: number
    readonly peakRssMiB: number
    readonly counters: Record<string, number>
  }
  readonly steady: SteadyFigures
  readonly restart: RestartBenchFigures
  readonly steadyAfterRestart: SteadyFigures
  /** Phase (d); null with --drain 0. */
  readonly drain: DrainFigures | null
  /** With --ha: where etcd was, its CPU in the steady windows, and the drain's writes. */
  readonly ha: HaFigures | null
  readonly profile: { readonly file: string; readonly restart: ProfileSummary; readonly steady: ProfileSummary; readonly drain: ProfileSummary | null } | null
  /** With --cpu-prof-join: the first controller's profile over the cold join and the steady window after it. */
  readonly joinProfile: { readonly file: string; readonly join: ProfileSummary; readonly steady: ProfileSummary } | null
}

/** The HA side of a run. */
export interface HaFigures {
  readonly etcd: string
  readonly ttlSeconds: number
  /** etcd's CPU (every member started here) per second of the steady windows; null for an existing etcd. */
  readonly etcdCpuPerS: { readonly steady: number | null; readonly afterTakeover: number | null }
  /** etcd's applied writes over the drain requests (until the last one's answer) and over the whole phase. */
  readonly drainRequests: EtcdCounters | null
  readonly drainPhase: EtcdCounters | null
  /** The leader's main-thread CPU over the drain requests (s). */
  readonly drainMainThreadS: number | null
}

/** A steady-state window. */
export interface SteadyFigures {
  readonly seconds: number
  readonly checkinsPerS: number
  readonly handshakes: number
  readonly controllerCpuPerS: number
  readonly generatorCpuPerS: number
  readonly rssMiB: number
}

/** The kill -9 and restart. */
export interface RestartBenchFigures {
  /** A restart of the one controller, or (--ha) a take-over by the other replica. */
  readonly kind: 'restart' | 'takeover'
  /** Restart: until it listened again. Take-over: until the other replica answered as leader. */
  readonly listeningAfterS: number
  /** From the kill until every node had an answer again (null: not within the timeout). */
  readonly allRenewedS: number | null
  readonly renewed: number
  readonly movedShards: number
  readonly changedPlans: number
  /** Nodes whose answer came after their agent's fail-safe would have stopped its shards. */
  readonly failSafeLate: number
  /** The late nodes by the second after the kill their fail-safe was due in, and their attempts before the late answer. */
  readonly lateByFailSafeS: Readonly<Record<string, number>>
  readonly lateAttempts: Readonly<Record<string, number>>
  /** Of the late nodes, those answered after their fail-safe by no more than their own check-in timer fired late (the load generator's lag). */
  readonly lateWithinLag: number
  /** How long before the kill each node's last renewal had been sent, by second, of every node and of the late ones (LoadStatus.markRenewalAgeBySecond). */
  readonly renewalAgeAtKillS: Readonly<Record<string, number>>
  readonly lateRenewalAgeAtKillS: Readonly<Record<string, number>>
  /**
   * Medians over the late nodes and over the ones on time (s; null: none): how long before its fail-safe
   * moment the attempt that got the answer began, and how long it took from sending to the answer.
   */
  readonly answered: { readonly late: AnsweredMedians; readonly onTime: AnsweredMedians }
  readonly controllerCpuS: number
  /**
   * The controller's main thread (its event loop: TLS, requests, planning) from serving (restart: listening;
   * take-over: its first answer as leader) until the phase's end was read (the last renewal, up to a
   * second before): seconds on a CPU, seconds ready to run but waiting for a core, and the wall time. The
   * rest is the loop waiting for work: for nodes to come back (their retries are spread over their slack)
   * or, with thousands of handshakes in flight, for their bytes, that is for the load generators, which
   * share the machine (null: not read).
   */
  readonly controllerLoop: { readonly busyS: number; readonly runQueueS: number; readonly wallS: number } | null
  readonly generatorCpuS: number
  /** The load generators' event-loop delay from the kill to the end of the phase (the worst process's; ms). */
  readonly generatorLoopDelayMs: LoopDelay | null
  readonly handshakes: number
  /** Of those, how many resumed the TLS session of before the kill (session-ticket keys kept in state_dir). */
  readonly resumedHandshakes: number
  /** Connections the controller deferred by admission (answered "come back in X" before any TLS work). */
  readonly deferred: number
  /** Failed attempts: time-outs, resets, error answers (deferrals not counted). */
  readonly failedAttempts: number
  readonly peakRssMiB: number
  /**
   * The serving controller's own view of the phase's handshakes (pxe_tls_handshake_duration_seconds, from
   * accept to established): how many, and the histogram bucket bounds the median and the 90th percentile
   * fall under (s); null when its /metrics could not be read.
   */
  readonly controllerHandshakes: { readonly count: number; readonly p50: number; readonly p90: number } | null
}

/** Medians of an answered attempt's lead before the fail-safe and its duration (s). */
export interface AnsweredMedians {
  readonly leadS: number | null
  readonly tookS: number | null
  /** Of that attempt: TCP connect, TLS handshake, request to answer (s). */
  readonly tcpS: number | null
  readonly tlsS: number | null
  readonly replyS: number | null
  /** How late the check-in timer that started it fired (s): the load generator's own lag. */
  readonly lagS: number | null
}

function answeredMedians(t: AnsweredTally): AnsweredMedians {
  const s = (ms: number | null) => (ms === null ? null : ms / 1000)
  return { leadS: s(medianOfBuckets(t.leadMs)), tookS: s(medianOfBuckets(t.tookMs)), tcpS: s(medianOfBuckets(t.tcpMs)), tlsS: s(medianOfBuckets(t.tlsMs)), replyS: s(medianOfBuckets(t.replyMs)), lagS: s(medianOfBuckets(t.lagMs, LAG_BUCKET_MS)) }
}

/** Attempts that failed (time-outs, resets, error answers), from the load generator's counters. */
export function failedAttempts(counters: Readonly<Record<string, number>>): number {
  return Object.entries(counters).filter(([k]) => k.startsWith('error_') || k.startsWith('status_')).reduce((sum, [, v]) => sum + v, 0)
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)))
const COLD_JOIN_TIMEOUT_MS = 600_000
const RESTART_TIMEOUT_MS = 180_000
/**
 * Node i's source address: 127.1.x.y, one per `perAddress` nodes (--nodes-per-address). One each by
 * default, as PXE-booted machines have; more stand for nodes behind one NAT, which share the per-address
 * connection cap and admission's appointment book (server/admission.ts).
 */
export function sourceAddress(i: number, perAddress: number): string {
  const k = Math.floor(i / perAddress)
  return `127.${1 + Math.floor(k / 62_500)}.${Math.floor(k / 250) % 250}.${(k % 250) + 1}`
}

interface Bench {
  readonly opts: BenchOptions
  readonly log: (line: string) => void
  readonly progress: (line: string) => void
  /** The replica serving now (the only one without --ha): its CPU is the controller's. */
  controller: ControllerChild
  readonly replicas: readonly ControllerChild[]
  /** Each replica's operations port (its /metrics), in the order of `replicas`. */
  readonly opsPorts: readonly number[]
  readonly pool: LoadPool
  readonly ha: HaSide | null
  readonly operatorId: FleetPki['operator'] & { readonly ca: string }
}

async function preparePki(opts: BenchOptions, names: readonly string[], log: (l: string) => void): Promise<{ pki: FleetPki; root: string; temporary: boolean }> {
  const root = opts.pki === undefined ? await mkdtemp(join(tmpdir(), 'pxe-fleet-bench-')) : resolve(opts.pki)
  const reused = opts.pki === undefined ? null : await reuseFleetPki(root, names)
  if (reused !== null) {
    log(`  reusing the PKI and ${names.length} bundles in ${root}`)
    return { pki: reused, root, temporary: false }
  }
  if (opts.pki !== undefined) await mkdir(root, { recursive: true, mode: 0o700 })
  log(`  issuing ${names.length} P-256 node bundles (issue --names) into ${root}…`)
  const started = sharedNow()
  const pki = await makeFleetPki(root, names, (line) => log(`    ${line}`))
  log(`  issued in ${((sharedNow() - started) / 1000).toFixed(0)} s`)
  return { pki, root, temporary: opts.pki === undefined }
}

/** Runs every phase --repeat times (a fresh controller and fresh nodes each time) and returns each run's figures. */
export async function runFleetBench(opts: BenchOptions, log: (line: string) => void, progress: (line: string) => void): Promise<BenchFigures[]> {
  const names = Array.from({ length: opts.nodes }, (_, i) => nodeName(i, opts.nodes))
  const { pki, root, temporary } = await preparePki(opts, names, log)
  const unregister = onInterrupt(() => {
    if (temporary) rmSync(root, { recursive: true, force: true })
  })
  let ha: HaSide | null = null
  try {
    if (opts.ha) ha = await openHaSide(opts['ha-etcd'] ?? null, log)
    const runs: BenchFigures[] = []
    for (let r = 1; r <= opts.repeat; r++) {
      if (opts.repeat > 1) log(`run ${r} of ${opts.repeat}`)
      runs.push(await runOnce(opts, names, pki, log, progress, ha, r))
    }
    return runs
  } finally {
    unregister()
    await ha?.close()
    if (temporary) await rm(root, { recursive: true, force: true }) // its private keys do not outlive the run
  }
}

/** One run of every phase against a fresh controller, the ceiling measured first. */
async function runOnce(opts: BenchOptions, names: readonly string[], pki: FleetPki, log: (line: string) => void, progress: (line: string) => void, ha: HaSide | null, runNumber: number): Promise<BenchFigures> {
  const loadStart = loadAverage()
  let ceiling: CeilingCosts | null = null
  if (!opts['no-ceiling']) {
    ceiling = await ceilingCosts(pki)
    log(`  ceiling (raw node:https, P-256, measured now): a full connection ${ceiling.fullMs.toFixed(2)} ms of server CPU, a resumed one ${ceiling.resumedMs.toFixed(2)} ms, a renewal arriving alone ${ceiling.renewalMs.toFixed(2)} ms`)
  }
  const run = await mkdtemp(join(tmpdir(), 'pxe-fleet-bench-run-'))
  // a prefix of its own per run: an existing etcd (--ha-etcd) may hold other deployments
  const prefix = `/pxe-fleet-bench-${process.pid}-${runNumber}/`
  const suffixes = ha === null ? [''] : ['-1', '-2']
  const opsPorts = await Promise.all(suffixes.map(() => freePort()))
  const replicas = suffixes.map(
    (suffix, i) =>
      new ControllerChild({ configPath: join(run, `controller${suffix}.json`), config: benchConfig(opts, pki, run, suffix, ha?.section(prefix, opts['ha-ttl']) ?? null, opsPorts[i]!), logPath: join(run, `controller${suffix}.log`), nodeArgs: opts['controller-node-args'] }),
  )
  const pool = new LoadPool(opts.workers, opts['generator-nice'], opts['generator-prof'] === undefined ? undefined : resolve(opts['generator-prof']))
  const unregister = onInterrupt(() => rmSync(run, { recursive: true, force: true }))
  const operatorId = { ...pki.operator, ca: pki.ca }
  try {
    const joinProf = opts['cpu-prof-join']
    await replicas[0]!.start(joinProf === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', resolve(joinProf)])
    const firstPid = replicas[0]!.pid
    if (ha !== null) {
      // the first replica leads (the nodes try it first), the second follows
      await waitLeading(replicas[0]!, operatorId, 60_000)
      // the replica that takes over is the one profiled (--cpu-prof): the take-over, steady window, drain
      const prof = opts['cpu-prof']
      await replicas[1]!.start(prof === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', resolve(prof)])
      log(`  two replicas: ${replicas[0]!.port} leads, ${replicas[1]!.port} follows (etcd lease TTL ${opts['ha-ttl']} s, prefix ${prefix})`)
    }
    const specs: LoadNodeSpec[] = names.map((name, i) => ({ name, capacity: opts.capacity, bundleDir: join(pki.bundles, name), localAddress: sourceAddress(i, opts['nodes-per-address']) }))
    await pool.init(replicas.map((r) => r.port), pki.ca, specs)
    const bench: Bench = { opts, log, progress, controller: replicas[0]!, replicas, opsPorts, pool, ha, operatorId }
    const joinFrom = sharedNow()
    const coldJoin = await coldJoinPhase(bench)
    const joinTo = sharedNow()
    log(`  (a) cold join: every node joined after ${coldJoin.allJoinedS.toFixed(1)} s; plan stable, every node holding its range after ${coldJoin.stableS.toFixed(1)} s`)
    await followLeader(bench, 'cold join')
    const steady = await steadyPhase(bench)
    await followLeader(bench, 'steady window')
    const restart = ha === null ? await restartPhase(bench) : await takeoverPhase(bench)
    const after = await steadyPhase(bench)
    const drain = opts.drain === 0 ? null : await timedDrain(bench, names)
    await pool.stop()
    const profiled = bench.controller
    await Promise.all(replicas.map((r) => r.stop())) // SIGTERM: a profiled controller writes its profile now
    const profile = opts['cpu-prof'] === undefined ? null : await readProfile(opts['cpu-prof'], restart, after, drain, profiled)
    const joinProfile = joinProf === undefined ? null : await readJoinProfile(joinProf, firstPid, { from: joinFrom, to: joinTo }, steady)
    const figures = { coldJoin, steady: steady.figures, restart: restart.figures, steadyAfterRestart: after.figures, drain: drain?.figures ?? null }
    const haFigures: HaFigures | null =
      ha === null
        ? null
        : {
            etcd: ha.origin === 'started' ? `3 members started for the run (${ha.connection.endpoints.join(', ')})` : ha.origin,
            ttlSeconds: opts['ha-ttl'],
            etcdCpuPerS: { steady: steady.etcdCpuPerS, afterTakeover: after.etcdCpuPerS },
            drainRequests: drain?.etcd?.requests ?? null,
            drainPhase: drain?.etcd?.phase ?? null,
            drainMainThreadS: drain?.mainThreadS ?? null,
          }
    return { options: opts, loadAverage: { start: loadStart, end: loadAverage() }, ceiling, ...figures, ha: haFigures, profile, joinProfile }
  } finally {
    unregister()
    pool.kill()
    await Promise.all(replicas.map((r) => r.close()))
    if (ha !== null && ha.origin !== 'started') await ha.dropPrefix(prefix).catch((err: unknown) => log(`  could not remove ${prefix} from etcd: ${(err as Error).message}`))
    await rm(run, { recursive: true, force: true })
  }
}

/**
 * With --ha: points the bench at the replica that leads now (the one that answers GET /v1/plan), so
 * that the figures are its process's and the take-over kills it. A leader can lose its etcd lease under
 * a storm (its renewals wait behind the handshakes on its one thread): that is said, not hidden.
 */
async function followLeader(bench: Bench, phase: string): Promise<void> {
  if (bench.replicas.length < 2) return
  for (const replica of bench.replicas) {
    try {
      await new OperatorClient(bench.operatorId, () => [replica.port]).plan()
    } catch {
      continue
    }
    if (replica !== bench.controller) bench.log(`  leadership moved to the replica on port ${replica.port} during the ${phase}; the figures follow it from here`)
    bench.controller = replica
    return
  }
  bench.log(`  no replica leads after the ${phase}; the figures stay with the replica on port ${bench.controller.port}`)
}

/** Resolves once `replica` answers GET /v1/plan (it leads); rejects after `timeoutMs`. */
async function waitLeading(replica: ControllerChild, id: Bench['operatorId'], timeoutMs: number): Promise<number> {
  const operator = new OperatorClient(id, () => [replica.port])
  const start = sharedNow()
  for (;;) {
    try {
      await operator.plan()
      return sharedNow()
    } catch (err) {
      if (sharedNow() - start > timeoutMs) throw new Error(`the replica on port ${replica.port} did not lead within ${timeoutMs / 1000} s: ${(err as Error).message}`)
      await sleep(100)
    }
  }
}

/** A loopback port free right now (for a replica's operations endpoint). */
function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolvePort(port))
    })
  })
}

/** A replica's (by default the serving one's) /metrics text, or null when it cannot be read within `timeoutMs`. */
async function metricsText(bench: Bench, replica = bench.controller, timeoutMs = 5000): Promise<string | null> {
  const port = bench.opsPorts[bench.replicas.indexOf(replica)]
  try {
    return await (await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(timeoutMs) })).text()
  } catch {
    return null
  }
}

/** The serving replica's pxe_replan_duration_seconds_sum (s), or null when its /metrics cannot be read. */
async function replanSeconds(bench: Bench): Promise<number | null> {
  const text = await metricsText(bench)
  const found = text === null ? null : /^pxe_replan_duration_seconds_sum (\S+)$/m.exec(text)
  return found === null ? null : Number(found[1])
}

/** A replica's (by default the serving one's) pxe_tls_handshake_duration_seconds buckets (upper bound → cumulative count), or null. */
async function handshakeBuckets(bench: Bench, replica = bench.controller): Promise<Map<number, number> | null> {
  const text = await metricsText(bench, replica)
  if (text === null) return null
  const buckets = new Map<number, number>()
  for (const m of text.matchAll(/^pxe_tls_handshake_duration_seconds_bucket\{le="([^"]+)"\} (\S+)$/gm)) buckets.set(m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2]))
  return buckets.size === 0 ? null : buckets
}

/** The handshakes between two readings of handshakeBuckets (`before` null: none before), as RestartBenchFigures has them. */
export function handshakeQuantiles(before: Map<number, number> | null, after: Map<number, number> | null): RestartBenchFigures['controllerHandshakes'] {
  if (after === null) return null
  const bounds = [...after.keys()].sort((a, b) => a - b)
  const cumulative = bounds.map((le) => (after.get(le) ?? 0) - (before?.get(le) ?? 0))
  const count = cumulative.at(-1) ?? 0
  const under = (q: number) => bounds[cumulative.findIndex((c) => c >= q * count)] ?? Infinity
  return { count, p50: under(0.5), p90: under(0.9) }
}

/**
 * The serving replica as it stands, from its /metrics: TLS connections open, check-ins answered 200,
 * and admission's state (server/admission.ts: the cost per connection it estimates, the connections it
 * deferred so far, the handshakes it holds in flight and the loop's utilization it decides by); null
 * when /metrics cannot be read (yet). Shown in the progress lines: a restart that
 * defers thousands while the controller's CPU stays low points at the estimate, one whose CPU is a full
 * core at the machine, and check-ins answered well ahead of the nodes' renewals at the load generators.
 */
async function controllerNow(bench: Bench): Promise<{ costMs: number; deferred: number; open: number; checkins: number; inFlight: number | null; loop: number | null } | null> {
  const text = await metricsText(bench, bench.controller, 1000)
  if (text === null) return null
  const read = (pattern: RegExp) => {
    const m = pattern.exec(text)
    return m === null ? null : Number(m[1])
  }
  const cost = read(/^pxe_connection_cost_seconds (\S+)$/m)
  const deferred = read(/^pxe_connections_deferred_total (\S+)$/m)
  const open = read(/^pxe_tls_connections_open (\S+)$/m)
  const checkins = read(/^pxe_requests_total\{(?=[^}]*route="\/v1\/checkin")(?=[^}]*status="200")[^}]*\} (\S+)$/m) ?? 0
  // Newer gauges: a controller without them (an older build compared side by side) still shows the rest.
  const inFlight = read(/^pxe_tls_handshakes_in_flight (\S+)$/m)
  const loop = read(/^pxe_event_loop_utilization_ratio (\S+)$/m)
  return cost === null || deferred === null || open === null ? null : { costMs: cost * 1000, deferred, open, checkins, inFlight, loop }
}

function benchConfig(opts: BenchOptions, pki: FleetPki, run: string, suffix: string, ha: Record<string, unknown> | null, opsPort: number): Record<string, unknown> {
  // Rate limits and connection caps stay the defaults: nodes come from many 127.x addresses instead.
  return {
    listen: { host: '127.0.0.1', port: 0 },
    ...controllerFiles(pki.dir),
    ...(ha === null ? { state_dir: join(run, 'state') } : { ha }),
    audit_log: join(run, `audit${suffix}.log`),
    // a port of its own per replica: the bench reads the re-plan time from /metrics
    ops: { host: '127.0.0.1', port: opsPort },
    controller_id: `fleet-bench${suffix}`,
    total_shards: opts.shards,
    max_concurrency: opts['max-concurrency'],
    lease_seconds: opts.lease,
    planner: opts.planner,
    // The light nodes deposit sessions resuming at wss://gateway.discord.gg (phase d); these are the defaults, spelled out.
    session_handoff: { allowed_hosts: ['gateway.discord.gg', '*.discord.gg'], ttl_seconds: 60 },
  }
}

function sample(bench: Bench): ProcSample {
  const s = bench.controller.pid === null ? null : sampleProcess(bench.controller.pid)
  if (s === null) throw new Error('the controller process is gone')
  return s
}

/** Polls the load generators every 500 ms until `done` holds; progress once a second. */
async function pollUntil(bench: Bench, what: string, since: number, timeoutMs: number, done: (s: LoadStatus) => boolean): Promise<LoadStatus> {
  let lastProgress = 0
  for (;;) {
    const s = await bench.pool.status()
    if (done(s)) return s
    const now = sharedNow()
    if (now - since > timeoutMs) throw new Error(`${what}: not done within ${timeoutMs / 1000} s (${s.answered}/${s.nodes} answered)`)
    if (now - lastProgress >= 1000) {
      lastProgress = now
      const c = sample(bench)
      // The load generators' own CPU and memory: when they run out of a core, the nodes are late, not the controller.
      const load = bench.pool.pids.map(sampleProcess).filter((p) => p !== null)
      const loadCpu = load.reduce((sum, p) => sum + p.cpuSeconds, 0)
      const loadRss = load.reduce((sum, p) => sum + p.rssMiB, 0)
      // The controller's own view beside the generators': a gap between its answers and the nodes' renewals is the generators' lag.
      const a = await controllerNow(bench)
      const queue = a === null || a.inFlight === null || a.loop === null ? '' : `, ${a.inFlight} handshakes in flight, loop ${(a.loop * 100).toFixed(0)} % busy`
      const admission = a === null ? '' : `; controller: ${a.open} connections open, ${a.checkins} check-ins answered; admission: cost ${a.costMs.toFixed(2)} ms, deferred ${a.deferred}${queue}`
      bench.progress(`${what} ${((now - since) / 1000).toFixed(0)}s: ${s.answered}/${s.nodes} answered, generation ${s.minGeneration ?? '-'}..${s.maxGeneration ?? '-'} (${s.atMaxGeneration} at the newest), renewed ${s.markRenewed}; controller CPU ${c.cpuSeconds.toFixed(1)} s, RSS ${c.rssMiB.toFixed(0)} MiB; load generators CPU ${loadCpu.toFixed(1)} s, RSS ${loadRss.toFixed(0)} MiB${admission}`)
    }
    await sleep(500)
  }
}

async function coldJoinPhase(bench: Bench): Promise<BenchFigures['coldJoin']> {
  const cpu0 = sample(bench).cpuSeconds
  const replan0 = await replanSeconds(bench)
  const t0 = sharedNow()
  await bench.pool.start(bench.opts['join-spread'] * 1000)
  // Stable: every node answered and every node holds the same (so the last) generation.
  const s = await pollUntil(bench, 'cold join', t0, COLD_JOIN_TIMEOUT_MS, (st) => st.answered === st.nodes && st.minGeneration === st.maxGeneration)
  const end = sample(bench)
  const replan1 = await replanSeconds(bench)
  return {
    replanS: replan0 === null || replan1 === null ? null : replan1 - replan0,
    allJoinedS: (s.lastFirstAnswerAt! - t0) / 1000,
    stableS: (s.lastReachedMaxAt! - t0) / 1000,
    generation: s.maxGeneration,
    controllerCpuS: end.cpuSeconds - cpu0,
    rssMiB: end.rssMiB,
    peakRssMiB: end.peakRssMiB,
    counters: { ...s.counters },
  }
}

/** A time window on the shared timeline. */
interface Window {
  readonly from: number
  readonly to: number
}

async function steadyPhase(bench: Bench): Promise<Window & { figures: SteadyFigures; etcdCpuPerS: number | null }> {
  const s0 = await bench.pool.status()
  const c0 = sample(bench)
  const e0 = bench.ha?.cpuSeconds() ?? null
  const t0 = sharedNow()
  await sleep(bench.opts.steady * 1000)
  const s1 = await bench.pool.status()
  const c1 = sample(bench)
  const e1 = bench.ha?.cpuSeconds() ?? null
  const seconds = (sharedNow() - t0) / 1000
  const figures = {
    seconds,
    checkinsPerS: ((s1.counters.checkins ?? 0) - (s0.counters.checkins ?? 0)) / seconds,
    handshakes: (s1.counters.handshakes ?? 0) - (s0.counters.handshakes ?? 0),
    controllerCpuPerS: (c1.cpuSeconds - c0.cpuSeconds) / seconds,
    generatorCpuPerS: (s1.cpuSeconds - s0.cpuSeconds) / seconds,
    rssMiB: c1.rssMiB,
  }
  const etcdCpuPerS = e0 === null || e1 === null ? null : (e1 - e0) / seconds
  const etcd = etcdCpuPerS === null ? '' : `; etcd CPU ${etcdCpuPerS.toFixed(3)} s per second`
  bench.log(`  (c) steady state: ${figures.checkinsPerS.toFixed(0)} check-ins/s, controller CPU ${figures.controllerCpuPerS.toFixed(3)} s per second, RSS ${figures.rssMiB.toFixed(0)} MiB${etcd}`)
  return { figures, etcdCpuPerS, from: t0, to: sharedNow() }
}

async function restartPhase(bench: Bench): Promise<Window & { figures: RestartBenchFigures }> {
  await bench.pool.mark()
  const s0 = await bench.pool.status()
  const killedAt = sharedNow()
  // --cpu-prof-join: the first controller must exit cleanly to write its profile (said beside the figures)
  if (bench.opts['cpu-prof-join'] === undefined) await bench.controller.kill9()
  else await bench.controller.stop()
  const prof = bench.opts['cpu-prof']
  await bench.controller.start(prof === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', resolve(prof)])
  const listeningAt = sharedNow()
  const cpu0 = sample(bench).cpuSeconds
  const main0 = mainThreadSchedSeconds(bench.controller.pid!)
  let s: LoadStatus
  let allRenewed: number | null = null
  try {
    s = await pollUntil(bench, 'restart', killedAt, RESTART_TIMEOUT_MS, (st) => st.markRenewed === st.nodes)
    allRenewed = s.markLastAt
  } catch (err) {
    bench.log(`  (b) ${(err as Error).message}`)
    s = await bench.pool.status()
  }
  const end = sample(bench)
  const loop = loopBusy(main0, listeningAt, bench.controller.pid!, allRenewed)
  const handshakes = handshakeQuantiles(null, await handshakeBuckets(bench))
  const figures = markFigures('restart', { killedAt, answeringAt: listeningAt, allRenewed, cpu0, loop }, s0, s, end, handshakes)
  bench.log(`  (b) restart: listening ${figures.listeningAfterS.toFixed(1)} s after the kill, every node renewed after ${figures.allRenewedS?.toFixed(1) ?? '-'} s, shards moved ${figures.movedShards}`)
  return { figures, from: killedAt, to: allRenewed ?? sharedNow() }
}

/**
 * Phase (b) with --ha: kill -9 of the leading replica; the other takes over once the election key's lease
 * runs out, and the nodes (failing over from the refused port) renew with it. The killed replica starts
 * again afterwards, as a follower. The figures are the restart's, measured on the new leader.
 */
async function takeoverPhase(bench: Bench): Promise<Window & { figures: RestartBenchFigures }> {
  const killed = bench.controller
  const next = bench.replicas.find((r) => r !== killed)!
  await bench.pool.mark()
  const s0 = await bench.pool.status()
  const cpu0 = sampleProcess(next.pid!)!.cpuSeconds
  const buckets0 = await handshakeBuckets(bench, next)
  const killedAt = sharedNow()
  await killed.kill9()
  bench.controller = next
  // watched beside the nodes: handled at once, so a time-out here is reported, not an unhandled rejection
  // The main thread's figures read as soon as it answers as leader: the loop's busy share is taken from then on.
  const leading = waitLeading(next, bench.operatorId, RESTART_TIMEOUT_MS).then(
    (at) => ({ at, main0: mainThreadSchedSeconds(next.pid!) }),
    (err: unknown) => {
      bench.log(`  (b) ${(err as Error).message}`)
      return null
    },
  )
  let s: LoadStatus
  let allRenewed: number | null = null
  try {
    s = await pollUntil(bench, 'take-over', killedAt, RESTART_TIMEOUT_MS, (st) => st.markRenewed === st.nodes)
    allRenewed = s.markLastAt
  } catch (err) {
    bench.log(`  (b) ${(err as Error).message}`)
    s = await bench.pool.status()
  }
  const led = await leading
  const servingAt = led?.at ?? sharedNow()
  const end = sample(bench)
  const loop = loopBusy(led?.main0 ?? null, servingAt, next.pid!, allRenewed)
  // (no reading at the kill: every handshake the replica ever timed would count, so none is reported)
  const handshakes = buckets0 === null ? null : handshakeQuantiles(buckets0, await handshakeBuckets(bench))
  const prof = bench.opts['cpu-prof']
  // the killed replica comes back as a follower (profiled, if asked: it may lead after a later kill)
  await killed.start(prof === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', resolve(prof)])
  const figures = markFigures('takeover', { killedAt, answeringAt: servingAt, allRenewed, cpu0, loop }, s0, s, end, handshakes)
  bench.log(`  (b) take-over: the other replica led ${figures.listeningAfterS.toFixed(1)} s after the kill, every node renewed after ${figures.allRenewedS?.toFixed(1) ?? '-'} s, shards moved ${figures.movedShards}`)
  return { figures, from: killedAt, to: allRenewed ?? sharedNow() }
}

/**
 * The main thread's figures from `start` (read at `from`) to now, against the wall time to now: both windows
 * end at this reading, so no CPU falls outside the wall time. Null when a reading is missing or the phase
 * did not end (`allRenewed` null).
 */
function loopBusy(start: { readonly cpuS: number; readonly runQueueS: number } | null, from: number, pid: number, allRenewed: number | null): RestartBenchFigures['controllerLoop'] {
  const end = mainThreadSchedSeconds(pid)
  const to = sharedNow()
  if (start === null || end === null || allRenewed === null || to <= from) return null
  return { busyS: end.cpuS - start.cpuS, runQueueS: end.runQueueS - start.runQueueS, wallS: (to - from) / 1000 }
}

/** The figures of a restart or take-over from the statuses at the mark (`s0`) and at the end (`s`). */
function markFigures(
  kind: RestartBenchFigures['kind'],
  t: { readonly killedAt: number; readonly answeringAt: number; readonly allRenewed: number | null; readonly cpu0: number; readonly loop: RestartBenchFigures['controllerLoop'] },
  s0: LoadStatus,
  s: LoadStatus,
  end: ProcSample,
  controllerHandshakes: RestartBenchFigures['controllerHandshakes'],
): RestartBenchFigures {
  const since = (k: string) => (s.counters[k] ?? 0) - (s0.counters[k] ?? 0)
  return {
    kind,
    listeningAfterS: (t.answeringAt - t.killedAt) / 1000,
    allRenewedS: t.allRenewed === null ? null : (t.allRenewed - t.killedAt) / 1000,
    renewed: s.markRenewed,
    movedShards: s.markLostShards,
    changedPlans: s.markRenewed - s.markSame,
    failSafeLate: s.markLate,
    lateByFailSafeS: s.markLateByFailSafe,
    lateAttempts: s.markLateAttempts,
    lateWithinLag: s.markLateWithinLag,
    renewalAgeAtKillS: s.markRenewalAgeBySecond,
    lateRenewalAgeAtKillS: s.markLateRenewalAgeBySecond,
    answered: { late: answeredMedians(s.markAnswered.late), onTime: answeredMedians(s.markAnswered.onTime) },
    controllerCpuS: end.cpuSeconds - t.cpu0,
    controllerLoop: t.loop,
    generatorCpuS: s.cpuSeconds - s0.cpuSeconds,
    generatorLoopDelayMs: s.markLoopDelayMs,
    handshakes: since('handshakes'),
    resumedHandshakes: since('handshakes_resumed'),
    deferred: since('deferred'),
    failedAttempts: failedAttempts(s.counters) - failedAttempts(s0.counters),
    peakRssMiB: end.peakRssMiB,
    controllerHandshakes,
  }
}

/** Phase (d) with its window on the shared timeline (for the profile), and with --ha etcd's writes. */
async function timedDrain(bench: Bench, names: readonly string[]): Promise<Window & { figures: DrainFigures; etcd: { requests: EtcdCounters; phase: EtcdCounters } | null; mainThreadS: number | null }> {
  const operator = new OperatorClient(bench.operatorId, () => bench.replicas.map((r) => r.port))
  const ha = bench.ha
  const pid = bench.controller.pid!
  let c0: EtcdCounters | null = null
  let c1: EtcdCounters | null = null
  let m0: number | null = null
  let m1: number | null = null
  const from = sharedNow()
  const figures = await drainPhase({
    names,
    drain: bench.opts.drain,
    pool: bench.pool,
    operator,
    controllerCpu: () => sample(bench).cpuSeconds,
    log: bench.log,
    progress: bench.progress,
    aroundRequests: {
      before: async () => {
        c0 = (await ha?.counters()) ?? null
        m0 = mainThreadSchedSeconds(pid)?.cpuS ?? null
      },
      after: async () => {
        m1 = mainThreadSchedSeconds(pid)?.cpuS ?? null
        c1 = (await ha?.counters()) ?? null
      },
    },
  })
  const c2 = (await ha?.counters()) ?? null
  const f = figures
  bench.log(`  (d) drain: ${f.resumes} resumed, ${f.grants} Identify grants; every moved shard running again ${f.allRunningS?.toFixed(1) ?? '-'} s after the first drain`)
  const etcd = c0 === null || c1 === null || c2 === null ? null : { requests: countersSince(c0, c1), phase: countersSince(c0, c2) }
  const mainThreadS = m0 === null || m1 === null ? null : (m1 as number) - (m0 as number)
  return { figures, etcd, mainThreadS, from, to: sharedNow() }
}

/**
 * The main-thread profile process `pid` wrote into `dir` (node names a profile
 * CPU.<date>.<time>.<pid>.<tid>.<seq>.cpuprofile; thread 0 is the main thread: the lease keeper, a worker
 * thread, writes a profile of its own), or with `anyIfNone` the newest profile there.
 */
async function loadProfile(dir: string, pid: number | null, anyIfNone: boolean): Promise<{ file: string; raw: unknown }> {
  const all = (await readdir(dir)).filter((f) => f.endsWith('.cpuprofile')).sort()
  const own = all.filter((f) => pid !== null && f.includes(`.${pid}.0.`))
  const files = own.length > 0 || !anyIfNone ? own : all
  if (files.length === 0) throw new Error(anyIfNone ? `no .cpuprofile in ${dir}` : `no .cpuprofile of process ${pid} in ${dir}`)
  const file = join(resolve(dir), files[files.length - 1]!)
  return { file, raw: JSON.parse(await readFile(file, 'utf8')) as unknown }
}

/** The profile the first controller (pid `pid`) wrote into `dir`, summarized over the cold join and the steady window after it. */
async function readJoinProfile(dir: string, pid: number | null, join_: Window, steady: Window): Promise<BenchFigures['joinProfile']> {
  const { file, raw } = await loadProfile(dir, pid, false)
  return { file, join: summarizeProfile(raw, join_.from, join_.to), steady: summarizeProfile(raw, steady.from, steady.to) }
}

/** The newest profile in `dir`, summarized over the restart (kill to every node renewed), the steady window after it and the drain. */
async function readProfile(dir: string, restart: Window, steady: Window, drain: Window | null, serving: ControllerChild): Promise<BenchFigures['profile']> {
  // the serving replica's, if it wrote one
  const { file, raw } = await loadProfile(dir, serving.lastPid, true)
  return {
    file,
    restart: summarizeProfile(raw, restart.from, restart.to),
    steady: summarizeProfile(raw, steady.from, steady.to),
    drain: drain === null ? null : summarizeProfile(raw, drain.from, drain.to),
  }
}
