/**
 * A rolling reboot (issue 60, SPEC "Leaving on purpose"): a fleet of nodes, each in a process of its own
 * running the discord.js adapter against the gateway emulator, and a real controller child process. Once
 * every shard serves, the nodes are rebooted one after another, as `systemctl restart pxe-node` on each
 * machine in turn would: the host ends the node's process (SIGTERM: the agent leaves; SIGKILL, the
 * control: everything in it vanishes, its sockets dropped by the kernel), the node stays down for the
 * reboot, then a new process of the same node starts (same certificate, fresh state, as a diskless node
 * with a bundle comes back), and the next reboot waits until the fleet has converged again with every
 * shard serving. The simulator's checks judge the timeline (no overlap, grant spacing), the emulator's
 * judge the gateway (no overlap, buckets, every event exactly once).
 */
import { rmSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { checkGrants, readAuditGrants } from './check-grants.js'
import { checkOverlaps } from './check-overlaps.js'
import { ControllerChild } from './controller-process.js'
import { ControllerSet } from './controller-set.js'
import { judgeConvergence } from './convergence.js'
import { makeFleetPki } from './fleet-pki.js'
import { GatewayRun } from './gateway-run.js'
import { onInterrupt } from './interrupt.js'
import { FleetLedger } from './ledger.js'
import { OperatorClient } from './operator-client.js'
import type { FleetRecord } from './protocol.js'
import { interruptions, moveStats, rebootFigures, type RebootNote, type RollingSummary } from './rolling-figures.js'
import type { RollingOptions } from './rolling-options.js'
import { buildScenario, type NodeSpec } from './scenario.js'
import { sharedNow } from './shared-clock.js'
import { eventViolations, fleetConfig, replicaFiles, type FleetOutput } from './simulator.js'
import { countByKind, type Violation } from './violations.js'
import { WorkerPool } from './worker-pool.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)))
const POLL_MS = 200

/** What the phases share. */
interface Rolling {
  readonly ro: RollingOptions
  readonly out: FleetOutput
  readonly nodes: readonly NodeSpec[]
  readonly bundles: string
  readonly ledger: FleetLedger
  readonly violations: Violation[]
  readonly pool: WorkerPool
  readonly operator: OperatorClient
  readonly gateway: GatewayRun
}

/** Runs a rolling reboot and returns its summary (violations included); throws only on setup failures. */
export async function runRollingReboot(ro: RollingOptions, out: FleetOutput): Promise<RollingSummary> {
  const opts = ro.fleet
  const scenario = buildScenario(opts)
  const root = await mkdtemp(join(tmpdir(), 'pxe-rolling-'))
  let controller: ControllerSet | null = null
  let pool: WorkerPool | null = null
  let gateway: GatewayRun | null = null
  const unregister = onInterrupt(() => {
    if (!opts.keep) rmSync(root, { recursive: true, force: true })
  })
  try {
    out.info(`rolling: making a PKI and ${opts.nodes} P-256 node bundles in ${root}`)
    const pki = await makeFleetPki(root, scenario.nodes.map((n) => n.name), (line) => out.info(`  ${line}`))
    const violations: Violation[] = []
    const ledger = new FleetLedger()
    const [files] = replicaFiles(root, false)
    controller = new ControllerSet([
      new ControllerChild({
        configPath: files!.config,
        config: { ...fleetConfig(opts, pki, root, files!, null), ...(ro.planner === null ? {} : { planner: ro.planner }) },
        logPath: files!.log,
        onUnexpectedExit: (code) => violations.push({ kind: 'process_failed', detail: `the controller exited by itself (${code})` }),
      }),
    ])
    await controller.start()
    const g = (gateway = await GatewayRun.start(opts))
    pool = new WorkerPool(scenario.processes, (records, deliveries, owners) => {
      ledger.add(records)
      g.addDeliveries(deliveries)
      g.addOwners(owners)
    }, (i, code) => violations.push({ kind: 'process_failed', detail: `agent worker ${i} exited (${code})` }))
    await pool.init({ controllers: controller.ports.map((port) => `https://127.0.0.1:${port}`), ca: pki.ca, jwks: pki.jwks, identifyIntervalMs: opts.identifyIntervalMs, gateway: g.target })
    const c = controller
    const operator = new OperatorClient({ ...pki.operator, ca: pki.ca }, () => c.ports)
    const run: Rolling = { ro, out, nodes: scenario.nodes, bundles: pki.bundles, ledger, violations, pool, operator, gateway: g }
    const summary = await rollThrough(run, root, files!.audit)
    await pool.shutdown()
    await controller.stop()
    if (opts.keep) await writeFile(join(root, 'records.jsonl'), ledger.records.map((r) => JSON.stringify(r)).join('\n') + '\n')
    return summary
  } finally {
    unregister()
    pool?.kill()
    await gateway?.stop()
    await controller?.close()
    if (opts.keep) out.info(`rolling: run folder kept: ${root} (it holds private keys: delete it when done)`)
    else await rm(root, { recursive: true, force: true })
  }
}

/** The cold start, the reboots one after another, then the checks and the figures. */
async function rollThrough(run: Rolling, root: string, auditLog: string): Promise<RollingSummary> {
  const { ro, out, ledger, gateway } = run
  const opts = ro.fleet
  const startedAt = sharedNow()
  out.info(`rolling: ${opts.nodes} nodes (capacity ${opts.capacity}), ${opts.shards} shards, max_concurrency ${opts.maxConcurrency}, lease ${opts.leaseS} s, identify_interval_ms ${opts.identifyIntervalMs}, reboot ${ro.rebootMs} ms, ${ro.signal}, ${opts.gatewayEventsPerSecond} events/s a session, planner ${ro.planner ?? 'contiguous (default)'}`)
  for (const n of run.nodes) await startNode(run, n)
  const coldAt = await converged(run)
  if (coldAt === null) throw new Error(`the fleet did not converge within ${opts.settleTimeoutS} s of the cold start`)
  out.info(`rolling: every shard serving after ${((coldAt - startedAt) / 1000).toFixed(1)} s; rebooting the nodes one after another (${ro.signal})`)
  gateway.enter('rolling')
  const rollingAt = sharedNow()
  const notes: RebootNote[] = []
  for (const node of [...run.nodes].sort((a, b) => a.name.localeCompare(b.name))) {
    const note = await reboot(run, node)
    notes.push(note)
    const secs = (t: number | null, from: number) => (t === null ? 'never' : `${((t - from) / 1000).toFixed(1)} s`)
    out.info(`rolling: ${node.name} ${ro.signal} → gone after ${secs(note.goneAt, note.signalledAt)}, back (checked in) ${secs(note.backAt, note.startedAt)} after its start, fleet converged ${secs(note.convergedAt, note.startedAt)} after it`)
    if (note.convergedAt === null) break
  }
  const rollingEnd = sharedNow()
  const finished = await gateway.finish([], opts.keep ? join(root, 'gateway.json') : null, [])
  const endT = sharedNow()
  return summarize(run, { startedAt, coldAt, rollingAt, rollingEnd, endT, notes, auditLog, gateway: finished })
}

async function startNode(run: Rolling, node: NodeSpec): Promise<void> {
  await run.pool.startAgent(node.process, node.name, node.capacity, join(run.bundles, node.name))
}

/**
 * Polls until the controller's plan holds every node, each runs exactly its range at the current
 * generation, and the gateway has a live session for every shard; when, or null after the settle timeout
 * (a not_converged violation).
 */
async function converged(run: Rolling): Promise<number | null> {
  const opts = run.ro.fleet
  const deadline = sharedNow() + opts.settleTimeoutS * 1000
  let last: string[] = []
  for (;;) {
    const plan = await run.operator.plan().catch((err: Error) => err)
    if (!(plan instanceof Error)) {
      const verdict = judgeConvergence(plan, run.ledger, run.nodes, new Set())
      const live = run.gateway.emulator.sessions({ state: 'live' }).length
      if (verdict.converged && live === opts.shards) return sharedNow()
      last = verdict.converged ? [`${live} live gateway sessions of ${opts.shards}`] : verdict.problems
    } else {
      last = [plan.message]
    }
    if (sharedNow() > deadline) break
    await sleep(POLL_MS)
  }
  run.violations.push({ kind: 'not_converged', detail: `not converged within ${opts.settleTimeoutS} s: ${last.join('; ')}` })
  return null
}

/**
 * One reboot: the host ends the node's process (SIGTERM: its agent leaves and the process exits; SIGKILL:
 * it vanishes, and its shards are recorded as stopped at the kill), the node is down `rebootMs`, a new
 * process of the node starts its agent, and the reboot is over once the fleet has converged again.
 */
async function reboot(run: Rolling, node: NodeSpec): Promise<RebootNote> {
  const { ro, pool, ledger } = run
  const held = [...ledger.runningOn(node.name)]
  const signalledAt = sharedNow()
  const exit = await pool.end(node.process, ro.signal)
  const goneAt = sharedNow()
  if (ro.signal === 'SIGKILL') {
    // Nothing in the process could record its end: its sessions stopped serving at the kill.
    ledger.add(held.map(([shard, count]): FleetRecord => ({ t: signalledAt, node: node.name, kind: 'stop', shard, totalShards: count, reason: 'killed' })))
  }
  await sleep(ro.rebootMs)
  await pool.replace(node.process)
  const startedAt = sharedNow()
  await startNode(run, node)
  const backBy = startedAt + ro.fleet.settleTimeoutS * 1000
  let backAt: number | null = null
  while (backAt === null && sharedNow() < backBy) {
    const plan = ledger.plans.get(node.name)
    if (plan !== undefined && plan.t >= startedAt) backAt = plan.t
    else await sleep(POLL_MS / 4)
  }
  const convergedAt = await converged(run)
  return { node: node.name, signalledAt, goneAt, exit, startedAt, backAt, convergedAt }
}

interface Marks {
  readonly startedAt: number
  readonly coldAt: number
  readonly rollingAt: number
  readonly rollingEnd: number
  readonly endT: number
  readonly notes: readonly RebootNote[]
  readonly auditLog: string
  readonly gateway: Awaited<ReturnType<GatewayRun['finish']>>
}

async function summarize(run: Rolling, m: Marks): Promise<RollingSummary> {
  const { ro, ledger } = run
  const opts = ro.fleet
  const leaseMs = opts.leaseS * 1000
  const overlaps = checkOverlaps({ records: ledger.records, freezes: [], revocations: [], endT: m.endT, wakeGraceMs: opts.wakeGraceMs, leaseMs })
  const audited = readAuditGrants(await readFile(m.auditLog, 'utf8').catch(() => ''))
  const grants = checkGrants({ audited, received: ledger.grants, intervalMs: opts.identifyIntervalMs, maxConcurrency: opts.maxConcurrency, dailyLimit: opts.dailyLimit })
  const violations = [...run.violations, ...overlaps.violations, ...grants.violations, ...eventViolations(ledger), ...m.gateway.violations]
  const all = interruptions(ledger.records, m.rollingAt)
  const moved = all.filter((i) => i.from !== i.to)
  const identifies = run.gateway.emulator.identifies.filter((r) => run.gateway.t0 + r.at >= m.rollingAt && run.gateway.t0 + r.at <= m.rollingEnd)
  const rolling = m.gateway.figures.phases.find((p) => p.phase === 'rolling')
  return {
    signal: ro.signal,
    nodes: opts.nodes,
    shards: opts.shards,
    maxConcurrency: opts.maxConcurrency,
    capacity: opts.capacity ?? 0,
    leaseSeconds: opts.leaseS,
    identifyIntervalMs: opts.identifyIntervalMs,
    rebootMs: ro.rebootMs,
    planner: ro.planner ?? 'contiguous',
    eventsPerSecond: opts.gatewayEventsPerSecond,
    coldStartS: (m.coldAt - m.startedAt) / 1000,
    rollingS: (m.rollingEnd - m.rollingAt) / 1000,
    runSeconds: (m.endT - m.startedAt) / 1000,
    reboots: rebootFigures(m.notes, all, m.rollingEnd),
    moves: moveStats(moved),
    away: moveStats(moved.filter((i) => i.reason !== 'plan')),
    rebalance: moveStats(moved.filter((i) => i.reason === 'plan')),
    sameNode: moveStats(all.filter((i) => i.from === i.to)),
    rollingIdentifies: rolling?.identifies ?? identifies.length,
    rollingIdentifiedShards: new Set(identifies.map((r) => r.shardId)).size,
    rollingResumes: rolling?.resumes ?? 0,
    leaves: { answered: ledger.counter('left'), failed: ledger.counter('leave_failed') },
    gateway: m.gateway.figures,
    violationsByKind: countByKind(violations),
    violations: violations.slice(0, 50),
  }
}
