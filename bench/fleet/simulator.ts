/**
 * One fleet run: a PKI and N node bundles, a controller child process (with --ha: two replicas on a real
 * etcd), agent worker processes running the real NodeAgent, the seeded churn, a settle phase, then the
 * checks over the one timeline.
 */
import { rmSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { mapChunked } from './chunked.js'
import { ChurnRunner } from './churn-runner.js'
import { checkGrants, readAuditGrants } from './check-grants.js'
import { checkOverlaps, coverageGap, type LiveReshardWindow } from './check-overlaps.js'
import { startEtcdMembers, type EtcdMembers } from '../support/etcd-process.js'
import { ControllerChild } from './controller-process.js'
import { ControllerSet } from './controller-set.js'
import { judgeConvergence } from './convergence.js'
import { partitionFigures, reshardFigures } from './event-figures.js'
import { controllerFiles, makeFleetPki, type FleetPki } from './fleet-pki.js'
import { GatewayRun, type GatewayFigures } from './gateway-run.js'
import { onInterrupt } from './interrupt.js'
import { FleetLedger } from './ledger.js'
import { moveFigures, percentile, restartFigures } from './metrics.js'
import { OperatorClient } from './operator-client.js'
import type { FleetOptions } from './options.js'
import { progressLine } from './progress.js'
import { buildScenario, type Scenario } from './scenario.js'
import { sharedNow } from './shared-clock.js'
import type { FleetSummary, LiveReshardFigures } from './summary.js'
import { countByKind, type Violation } from './violations.js'
import { WorkerPool } from './worker-pool.js'

/** Where a run writes its lines: `progress` for the line on stderr, `info` for milestones. */
export interface FleetOutput {
  progress(line: string): void
  info(line: string): void
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)))
const SETTLE_POLL_MS = 1000

/** How one controller process of a run is told apart: its id and files (one without HA, two with). */
export interface ReplicaFiles {
  readonly id: string
  readonly config: string
  readonly log: string
  readonly audit: string
}

/** The replicas' names and files: `controller.*` for the single controller, `controller-1.*`... with HA. */
export function replicaFiles(root: string, ha: boolean): ReplicaFiles[] {
  const names = ha ? ['controller-1', 'controller-2'] : ['controller']
  return names.map((name) => ({ id: `fleet-${name}`, config: join(root, `${name}.json`), log: join(root, `${name}.log`), audit: join(root, `audit${name.slice(10)}.log`) }))
}

/** The HA section of every replica: a short etcd lease (2 s, the minimum), so that a take-over is quick. */
function haSection(etcd: EtcdMembers): Record<string, unknown> {
  const { endpoints, ca, cert, key } = etcd.connection
  return { etcd: { endpoints: [...endpoints], ca, cert, key }, prefix: '/pxe-fleet/', lease_ttl_seconds: 2 }
}

/** A controller's config for a run: a state folder, or with `etcd` the HA section (the state is in etcd). */
export function fleetConfig(opts: FleetOptions, pki: FleetPki, root: string, files: ReplicaFiles, etcd: EtcdMembers | null): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', port: 0 },
    ...controllerFiles(pki.dir),
    // The run does not read the ops endpoint: off, so that neither two replicas nor anything else on the
    // machine holding its default port (9464) can stop a run.
    ...(etcd === null ? { state_dir: join(root, 'state') } : { ha: haSection(etcd) }),
    ops: null,
    audit_log: files.audit,
    controller_id: files.id,
    total_shards: opts.shards,
    max_concurrency: opts.maxConcurrency,
    lease_seconds: opts.leaseS,
    identify_interval_ms: opts.identifyIntervalMs,
    daily_identify_limit: opts.dailyLimit,
    // rate_limits stay the SPEC defaults: the agents must live within what production enforces. Every
    // simulated node connects from 127.0.0.1 (the agent has no source-address option), where production
    // nodes each have their own address: the per-address cap is raised to the fleet, the total cap stays.
    max_connections_per_address: opts.nodes + 64,
    // The emulator's resume URLs are ws://127.0.0.1:port: deposits of them must be accepted.
    ...(opts.gateway === 'discordjs' ? { session_handoff: { allowed_hosts: ['127.0.0.1'], ttl_seconds: 60 } } : {}),
  }
}

/** The parts of a run that the phases share. */
interface Run {
  readonly root: string
  readonly opts: FleetOptions
  readonly scenario: Scenario
  readonly out: FleetOutput
  readonly ledger: FleetLedger
  readonly violations: Violation[]
  readonly notes: string[]
  readonly controller: ControllerSet
  /** Every replica's audit log (one without HA). */
  readonly auditLogs: readonly string[]
  readonly pool: WorkerPool
  readonly operator: OperatorClient
  readonly churn: ChurnRunner
  /** The gateway emulator (--gateway discordjs), or null. */
  readonly gateway: GatewayRun | null
  phase: string
  /** The live reshard after the churn (--live-reshard), once begun. */
  liveReshard: (LiveReshardWindow & { oldGoneAt: number | null }) | null
}

/** Runs the whole simulation and returns its summary (violations included); throws only on setup failures. */
export async function runFleet(opts: FleetOptions, out: FleetOutput): Promise<FleetSummary> {
  const scenario = buildScenario(opts)
  const root = await mkdtemp(join(tmpdir(), 'pxe-fleet-'))
  let controller: ControllerSet | null = null
  let etcd: EtcdMembers | null = null
  let pool: WorkerPool | null = null
  let gateway: GatewayRun | null = null
  const unregister = onInterrupt(() => {
    if (!opts.keep) rmSync(root, { recursive: true, force: true })
  })
  try {
    out.info(`fleet: seed ${opts.seed}; making a PKI and ${opts.nodes} P-256 node bundles (issue --names) in ${root}`)
    const pki = await makeFleetPki(root, scenario.nodes.map((n) => n.name), (line) => out.info(`  ${line}`))
    const violations: Violation[] = []
    const ledger = new FleetLedger()
    if (opts.ha) {
      etcd = await startEtcdMembers(1)
      out.info(`fleet: etcd serving at ${etcd.connection.endpoints.join(', ')}; two controller replicas`)
    }
    const files = replicaFiles(root, opts.ha)
    const e = etcd
    controller = new ControllerSet(
      files.map(
        (f) =>
          new ControllerChild({
            configPath: f.config,
            config: fleetConfig(opts, pki, root, f, e),
            logPath: f.log,
            onUnexpectedExit: (code) => violations.push({ kind: 'process_failed', detail: `${f.id} exited by itself (${code})` }),
          }),
      ),
    )
    await controller.start()
    if (opts.gateway === 'discordjs') {
      gateway = await GatewayRun.start(opts)
      out.info(`fleet: gateway emulator at ${gateway.target.url} (${opts.shards} shards, max_concurrency ${opts.maxConcurrency}, ${opts.gatewayEventsPerSecond} events/s a session); the agents run the discord.js adapter`)
    }
    const g = gateway
    pool = new WorkerPool(scenario.processes, (records, deliveries, owners) => {
      ledger.add(records)
      g?.addDeliveries(deliveries)
      g?.addOwners(owners)
    }, (i, code) => violations.push({ kind: 'process_failed', detail: `agent worker ${i} exited (${code})` }))
    // A partitioned node's process puts a proxy in front of the controller and has slow stop callbacks.
    const extras = new Map(scenario.partitionProcesses.map((p) => [p, { slowStopMs: opts.slowStopMs, partitionable: true }]))
    // The agents' controller list: replica 1, then replica 2 (they fail over on a connection error or a 503).
    const controllers = controller.ports.map((port) => `https://127.0.0.1:${port}`)
    await pool.init({ controllers, ca: pki.ca, jwks: pki.jwks, identifyIntervalMs: opts.identifyIntervalMs, gateway: gateway?.target ?? null }, extras)
    const c = controller
    const operator = new OperatorClient({ ...pki.operator, ca: pki.ca }, () => c.ports)
    // HA: the agents start once a replica leads, so that the cold start is not a string of 503s.
    const deadline = sharedNow() + 30_000
    while ((await operator.leaderPort()) === null) {
      if (sharedNow() > deadline) throw new Error('no controller replica became the leader within 30 s')
      await sleep(200)
    }
    const auditLogs = files.map((f) => f.audit)
    const churn = new ChurnRunner({
      pool, controller, operator, ledger, violations, auditLogs, pkiDir: pki.dir, bundles: pki.bundles, nodes: scenario.nodes, totalShards: opts.shards, leaseMs: opts.leaseS * 1000, log: (l) => out.info(l),
    })
    const run: Run = { root, opts, scenario, out, ledger, violations, notes: [], controller, auditLogs, pool, operator, churn, gateway, phase: 'joining', liveReshard: null }
    return await simulate(run)
  } finally {
    unregister()
    pool?.kill()
    await gateway?.stop()
    await controller?.close()
    await etcd?.close()
    if (opts.keep) out.info(`fleet: run folder kept: ${root} (it holds private keys: delete it when done)`)
    else await rm(root, { recursive: true, force: true })
  }
}

async function simulate(run: Run): Promise<FleetSummary> {
  const { opts, scenario, churn, out } = run
  const startedAt = sharedNow()
  const ticker = setInterval(() => {
    if (opts.progress) out.progress(progressLine({ ledger: run.ledger, churn, startedAt, shards: churn.totalShards, events: scenario.events.length, phase: () => run.phase, controllerUp: () => run.controller.pid !== null }, sharedNow()))
  }, 1000)
  try {
    await mapChunked(scenario.nodes.filter((n) => n.initial), 100, (n) => churn.startNode(n.name))
    enterPhase(run, 'churn')
    for (const event of scenario.events) {
      await sleep(startedAt + event.at - sharedNow())
      await churn.run(event)
    }
    await churn.allThawed()
    enterPhase(run, 'settling')
    const churnEnd = sharedNow()
    const convergedAt = await settle(run)
    if (opts.liveReshardTo !== null && convergedAt !== null) await liveReshard(run, opts.liveReshardTo)
    run.phase = 'stopping'
    // Before the agents stop: their stops end every session (1000), which says nothing of the delivery.
    const windows = run.liveReshard === null ? [] : [run.liveReshard]
    const gateway = (await run.gateway?.finish(run.churn.revocations, opts.keep ? join(run.root, 'gateway.json') : null, windows)) ?? null
    await run.pool.shutdown()
    const endT = sharedNow()
    await run.controller.stop()
    // Every record, one JSON line each, for a look at what the checks judged (the folder is kept anyway).
    if (opts.keep) await writeFile(join(run.root, 'records.jsonl'), run.ledger.records.map((r) => JSON.stringify(r)).join('\n') + '\n')
    return await summarize(run, startedAt, endT, convergedAt === null ? null : (convergedAt - churnEnd) / 1000, gateway)
  } finally {
    clearInterval(ticker)
  }
}

/** Begins a phase of the run (the gateway's counts are kept per phase). */
function enterPhase(run: Run, phase: string): void {
  run.phase = phase
  run.gateway?.enter(phase)
}

/**
 * The live-reshard phase: POST /v1/reshard, then the controller's plan is polled until it runs the new
 * count (the switch), and the fleet until it converged on it (the old set stopped).
 */
async function liveReshard(run: Run, to: number): Promise<void> {
  enterPhase(run, 'live-reshard')
  const from = run.churn.totalShards
  const postedAt = sharedNow()
  await run.operator.reshard(to)
  run.out.info(`fleet: live reshard ${from} → ${to} posted; the next set identifies beside the current one`)
  let switchedAt: number | null = null
  run.liveReshard = { from, to, postedAt, switchedAt, oldGoneAt: null }
  const deadline = postedAt + run.opts.settleTimeoutS * 1000
  while (switchedAt === null && sharedNow() < deadline) {
    const plan = await run.operator.plan().catch(() => null)
    if (plan !== null && plan.total_shards === to) switchedAt = sharedNow()
    else await sleep(250)
  }
  run.liveReshard = { from, to, postedAt, switchedAt, oldGoneAt: null }
  if (switchedAt === null) {
    run.violations.push({ kind: 'reshard_not_switched', detail: `the live reshard to ${to} shards did not switch within ${run.opts.settleTimeoutS} s` })
    return
  }
  run.out.info(`fleet: switched to ${to} shards ${((switchedAt - postedAt) / 1000).toFixed(1)} s after the POST`)
  run.churn.totalShards = to
  await settle(run)
  // Converged on the new count is not the old set gone: each agent stops it a check-in interval after it
  // learned of the switch (switchGraceMs). Ending the run before that would stop the new set's shards at
  // shutdown beside old ones still running, which the coverage check reads as a gap.
  const goneBy = sharedNow() + run.opts.settleTimeoutS * 1000
  let oldGoneAt = lastStopOf(run.ledger.records, from)
  while (oldGoneAt === null && sharedNow() < goneBy) {
    await sleep(250)
    oldGoneAt = lastStopOf(run.ledger.records, from)
  }
  run.liveReshard = { from, to, postedAt, switchedAt, oldGoneAt }
}

/** When the last session of `count` shards stopped (null when one still runs or none ran). */
function lastStopOf(records: FleetLedger['records'], count: number): number | null {
  let open = 0
  let last: number | null = null
  for (const r of records) {
    if ((r.kind !== 'start' && r.kind !== 'stop') || r.totalShards !== count) continue
    open += r.kind === 'start' ? 1 : -1
    if (r.kind === 'stop') last = Math.max(last ?? 0, r.t)
  }
  return open > 0 ? null : last
}

/** Polls until the fleet converges or the settle timeout passes; returns when it converged, or null. */
async function settle(run: Run): Promise<number | null> {
  const deadline = sharedNow() + run.opts.settleTimeoutS * 1000
  let last: string[] = []
  for (;;) {
    const plan = await run.operator.plan().catch((err: Error) => err)
    if (!(plan instanceof Error)) {
      const verdict = judgeConvergence(plan, run.ledger, run.churn.expectedLive(), run.churn.draining)
      if (verdict.converged) return sharedNow()
      last = verdict.problems
      if (verdict.onlyShort && run.ledger.counter('claim:daily_limit') > 0) {
        run.notes.push(`the daily Identify budget is spent: converged up to it (${verdict.problems[0]})`)
        return sharedNow()
      }
    } else {
      last = [plan.message]
    }
    if (sharedNow() > deadline) break
    await sleep(SETTLE_POLL_MS)
  }
  run.violations.push({ kind: 'not_converged', detail: `not converged ${run.opts.settleTimeoutS} s after the churn: ${last.join('; ')}` })
  return null
}

async function summarize(run: Run, startedAt: number, endT: number, convergedAfterS: number | null, gateway: { figures: GatewayFigures; violations: Violation[] } | null): Promise<FleetSummary> {
  const { opts, ledger, churn } = run
  const leaseMs = opts.leaseS * 1000
  const live = run.liveReshard
  const overlaps = checkOverlaps({ records: ledger.records, freezes: churn.freezes, revocations: churn.revocations, endT, wakeGraceMs: opts.wakeGraceMs, leaseMs, liveReshards: live === null ? [] : [live] })
  // With HA every replica that led wrote its own grants: the spacing must hold across the take-over, so
  // both logs are read as one. A replica that never led may have no audit log.
  const texts = await Promise.all(run.auditLogs.map((path) => readFile(path, 'utf8').catch(() => '')))
  const audited = texts.flatMap((text) => readAuditGrants(text))
  const grants = checkGrants({ audited, received: ledger.grants, intervalMs: opts.identifyIntervalMs, maxConcurrency: opts.maxConcurrency, dailyLimit: opts.dailyLimit })
  let liveFigures: LiveReshardFigures | null = null
  if (live !== null) {
    // judged from the POST until the old set was gone (the end of the run if it never went)
    const gap = coverageGap(ledger.records, [live.from, live.to], live.postedAt, live.oldGoneAt ?? endT, endT)
    if (gap !== null) run.violations.push({ kind: 'coverage_gap', detail: `live reshard ${live.from} → ${live.to}: ${gap}` })
    liveFigures = {
      from: live.from,
      to: live.to,
      switchAfterS: live.switchedAt === null ? null : (live.switchedAt - live.postedAt) / 1000,
      oldSetGoneAfterS: live.oldGoneAt === null ? null : (live.oldGoneAt - live.postedAt) / 1000,
      nextGrants: texts.reduce((n, text) => n + (text.match(/"event":"identify_granted"[^\n]*"set":"next"/g)?.length ?? 0), 0),
      nextIdentifies: run.gateway?.identifiesOf(live.to) ?? null,
      coverageGap: gap,
      setOverlaps: overlaps.liveReshardOverlaps,
    }
  }
  const violations = [...run.violations, ...overlaps.violations, ...grants.violations, ...eventViolations(ledger), ...(gateway?.violations ?? [])]
  const moves = moveFigures(ledger.records)
  const revokedMs = overlaps.revokedOverlaps.map((o) => o.ms)
  const liveAtEnd = new Set(churn.expectedLive().map((n) => n.name))
  return {
    ha: opts.ha,
    seed: opts.seed,
    nodes: opts.nodes,
    shards: opts.shards,
    shardsAtEnd: churn.totalShards,
    maxConcurrency: opts.maxConcurrency,
    leaseSeconds: opts.leaseS,
    workerProcesses: run.scenario.processes,
    runSeconds: (endT - startedAt) / 1000,
    convergedAfterS,
    churn: Object.fromEntries(churn.done),
    counts: { records: ledger.records.length, ...Object.fromEntries(ledger.counters) },
    moves: moves.moves,
    handoffGapMs: { p50: percentile(moves.handoffGapsMs, 50), max: percentile(moves.handoffGapsMs, 100) },
    restarts: restartFigures(ledger.records, churn.restarts, leaseMs, liveAtEnd),
    takeovers: restartFigures(ledger.records, churn.takeovers, leaseMs, liveAtEnd).map((f, i) => ({ ...f, killedReplica: churn.takeovers[i]!.killed + 1 })),
    reshards: reshardFigures(ledger.records, churn.reshards, endT),
    liveReshard: liveFigures,
    partitions: partitionFigures(ledger.records, churn.partitions, endT),
    pauses: overlaps.pauses,
    revocations: overlaps.revocations.map((r) => ({ ...r, droppedAfterMs: churn.revocationNotes.find((n) => n.node === r.node)?.droppedAfterMs ?? null })),
    revokedOverlaps: { count: revokedMs.length, maxMs: revokedMs.length === 0 ? null : Math.max(...revokedMs) },
    grants: {
      received: ledger.grants.length,
      audited: audited.length,
      minAuditedGapMs: grants.minAuditedGapMs,
      minReceivedGapMs: grants.minReceivedGapMs,
      peakDaily: Math.max(grants.peakDailyAudited, grants.peakDailyReceived),
      dailyLimit: opts.dailyLimit,
      intervalMs: opts.identifyIntervalMs,
    },
    gateway: gateway?.figures ?? null,
    violationsByKind: countByKind(violations),
    violations: violations.slice(0, 50),
    notes: run.notes,
  }
}

/** Violations the agents reported themselves: a 429 (the agents must live within the default limits), a refused plan. */
export function eventViolations(ledger: FleetLedger): Violation[] {
  const out: Violation[] = []
  const limited = ledger.counter('checkin:429') + ledger.counter('claim:rate_limited')
  if (limited > 0) out.push({ kind: 'rate_limited', detail: `${limited} requests answered 429 under the default per-node limits` })
  for (const [name, n] of ledger.counters) if (name.startsWith('plan_refused:')) out.push({ kind: 'plan_refused', detail: `${n} plans refused (${name.slice(13)})` })
  return out
}
