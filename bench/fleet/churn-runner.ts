/**
 * Carries out the churn schedule against the real processes, one action after another, and notes on the
 * shared timeline what it did (freezes, revocations, restarts, reshards, partitions, take-overs) for the checks.
 */
import { join } from 'node:path'
import type { Freeze, Revocation } from './check-overlaps.js'
import type { ControllerSet } from './controller-set.js'
import { revokeWithCli } from './fleet-pki.js'
import type { FleetLedger } from './ledger.js'
import type { OperatorClient, OperatorPlan } from './operator-client.js'
import type { FleetRecord } from './protocol.js'
import { auditSince, auditSize, baselineOf, matchesBaseline, movedFrom, restoredFrom, type Restored } from './restart-baseline.js'
import type { ChurnEvent, NodeSpec } from './scenario.js'
import { sharedNow } from './shared-clock.js'
import type { Violation } from './violations.js'
import type { WorkerPool } from './worker-pool.js'

/** One kill -9 and restart of the controller. */
export interface RestartNote {
  readonly killedAt: number
  readonly listeningAt: number
  /** Nodes expected to renew after it (live, not frozen). */
  readonly expected: readonly string[]
  readonly generationBefore: number
  /**
   * The generation the new process restored, when above generationBefore: the controller made a change
   * durable between the read and the kill, and the judgement took the ranges nodes accepted under it.
   */
  readonly rebasedTo: number | null
  readonly generationAfter: number
  /** Shards whose owner differs between the plan of before the kill (see rebasedTo) and the one just after the start. */
  readonly moved: number
  /** Expected nodes whose first renewal after the start carried an older plan, or its generation with another range. */
  readonly changedRenewals: number
}

/**
 * One kill -9 of the leading HA replica. `listeningAt` is when the other replica first served the plan
 * (the take-over), so that the restart figures (downtime, every node renewed) read it as a restart.
 */
export interface TakeoverNote extends RestartNote {
  /** The `controller_id` index (0-based) of the replica killed. */
  readonly killed: number
  /** When the killed replica listened again (a follower). */
  readonly rejoinedAt: number
}

/** One reshard restart: the controller stopped and started again with another total_shards. */
export interface ReshardNote {
  readonly signal: 'SIGKILL' | 'SIGTERM'
  readonly stoppedAt: number
  readonly listeningAt: number
  readonly fromShards: number
  readonly toShards: number
  /** total_shards of the plan read just after the start (toShards when the controller took the new config). */
  readonly planTotalShards: number
  readonly generationBefore: number
  readonly generationAfter: number
  /** Nodes expected to take the new plan (live, not frozen, not partitioned). */
  readonly expected: readonly string[]
  /** ms from listening until every expected node had accepted the new generation (null: not within two leases). */
  readonly allOnNewPlanMs: number | null
}

/** One partition: the node's agent cut off the controller from `from` to `to`. */
export interface PartitionNote {
  readonly node: string
  readonly from: number
  readonly to: number
}

/** A revocation as the orchestrator saw the controller take it. */
export interface RevocationNote {
  readonly node: string
  /** ms from the rewritten CRL until the node was gone from the plan (null: not within the wait). */
  readonly droppedAfterMs: number | null
}

/** Where each node stands, as the orchestrator made it. */
export type NodeFate = 'idle' | 'running' | 'left' | 'revoked'

/** What the runner needs. */
export interface ChurnDeps {
  readonly pool: WorkerPool
  readonly controller: ControllerSet
  readonly operator: OperatorClient
  readonly pkiDir: string
  readonly bundles: string
  readonly nodes: readonly NodeSpec[]
  /** total_shards at the start of the run. */
  readonly totalShards: number
  readonly ledger: FleetLedger
  /** Each replica's audit log, in replica order: a restarted process tells there what it restored. */
  readonly auditLogs: readonly string[]
  readonly leaseMs: number
  readonly violations: Violation[]
  readonly log: (line: string) => void
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)))
const POLL_MS = 100
/** How long a join or revocation may take to show in the plan before the churn goes on anyway. */
const SHOW_MS = 10_000

/** Polls `check` until it holds or `timeoutMs` passes; true when it held. */
async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = sharedNow() + timeoutMs
  for (;;) {
    if (await check()) return true
    if (sharedNow() > deadline) return false
    await sleep(POLL_MS)
  }
}

/** Runs churn actions and keeps the notes. */
export class ChurnRunner {
  readonly fate = new Map<string, NodeFate>()
  readonly draining = new Set<string>()
  readonly freezes: Freeze[] = []
  readonly frozen = new Set<string>()
  readonly revocations: Revocation[] = []
  readonly revocationNotes: RevocationNote[] = []
  readonly restarts: RestartNote[] = []
  readonly reshards: ReshardNote[] = []
  readonly takeovers: TakeoverNote[] = []
  /** Nodes cut off the controller now, and every partition once healed. */
  readonly cut = new Set<string>()
  readonly partitions: PartitionNote[] = []
  readonly done = new Map<ChurnEvent['kind'], number>()
  /** The controller's total_shards now (a reshard changes it). */
  totalShards: number
  private readonly thaws: Promise<void>[] = []
  private readonly heals: Promise<void>[] = []
  private readonly spec: Map<string, NodeSpec>

  constructor(private readonly deps: ChurnDeps) {
    this.spec = new Map(deps.nodes.map((n) => [n.name, n]))
    for (const n of deps.nodes) this.fate.set(n.name, 'idle')
    this.totalShards = deps.totalShards
  }

  /** Starts one node's agent. */
  async startNode(name: string): Promise<void> {
    const node = this.spec.get(name)!
    await this.deps.pool.startAgent(node.process, name, node.capacity, join(this.deps.bundles, name))
    this.fate.set(name, 'running')
  }

  /** Nodes that should be in the plan at the end (running, not left, not revoked). */
  expectedLive(): NodeSpec[] {
    return this.deps.nodes.filter((n) => this.fate.get(n.name) === 'running')
  }

  /** Carries out one event. */
  async run(event: ChurnEvent): Promise<void> {
    switch (event.kind) {
      case 'join':
        // Complete once the controller has it: later actions (a restart) then see a settled cause.
        await this.startNode(event.node)
        await waitFor(() => this.inPlan(event.node, true), SHOW_MS)
        break
      case 'leave':
        await this.deps.pool.stopAgent(this.spec.get(event.node)!.process, event.node)
        this.fate.set(event.node, 'left')
        break
      case 'drain':
        await this.drain(event.node, event.draining)
        break
      case 'pause':
        await this.untilRunning(event.node)
        this.pause(event.node, event.forMs)
        break
      case 'restart':
        await this.restart(event.downMs)
        break
      case 'revoke':
        await this.revoke(event.node)
        break
      case 'reshard':
        await this.reshard(event)
        break
      case 'partition':
        await this.untilRunning(event.node)
        await this.partition(event.node, event.forMs)
        break
      case 'takeover':
        await this.takeover()
        break
    }
    this.done.set(event.kind, (this.done.get(event.kind) ?? 0) + 1)
  }

  private async inPlan(node: string, present: boolean): Promise<boolean> {
    const plan = await this.deps.operator.plan().catch(() => null)
    return plan !== null && plan.nodes.some((n) => n.node_id === node) === present
  }

  /**
   * A pause, partition or revocation waits (at most three leases) until its node runs a shard: else it
   * proves little. Three: in a busy fleet a node's range can move twice before it gets a grant.
   */
  private async untilRunning(node: string): Promise<void> {
    await waitFor(() => this.deps.ledger.runningOn(node).size > 0, 3 * this.deps.leaseMs)
  }

  /** `pxe-pki revoke`, then waits until the controller has dropped the node (SPEC: within 2 s). */
  private async revoke(node: string): Promise<void> {
    await this.untilRunning(node)
    const requestedAt = sharedNow()
    await revokeWithCli(this.deps.pkiDir, node)
    const at = sharedNow()
    this.revocations.push({ node, requestedAt, at })
    this.fate.set(node, 'revoked')
    const dropped = await waitFor(() => this.inPlan(node, false), SHOW_MS)
    this.revocationNotes.push({ node, droppedAfterMs: dropped ? sharedNow() - at : null })
  }

  /** Waits for every frozen process to be woken and every partition healed. */
  async allThawed(): Promise<void> {
    await Promise.all(this.thaws)
  }

  /** An operator drains (or undrains) a node; retried while the controller restarts. */
  private async drain(node: string, draining: boolean): Promise<void> {
    const deadline = sharedNow() + 30_000
    for (;;) {
      try {
        await this.deps.operator.drain(node, draining)
        if (draining) this.draining.add(node)
        else this.draining.delete(node)
        return
      } catch (err) {
        if (sharedNow() > deadline) throw err
        await sleep(250)
      }
    }
  }

  /** Freezes the node's process (SIGSTOP) for `forMs`, without waiting for the wake. */
  private pause(node: string, forMs: number): void {
    const process = this.spec.get(node)!.process
    const nodes = this.deps.nodes.filter((n) => n.process === process).map((n) => n.name)
    const from = sharedNow()
    this.deps.pool.freeze(process)
    for (const n of nodes) this.frozen.add(n)
    this.thaws.push(
      sleep(forMs).then(() => {
        this.deps.pool.thaw(process)
        this.freezes.push({ nodes, from, to: sharedNow() })
        for (const n of nodes) this.frozen.delete(n)
      }),
    )
  }

  /**
   * Cuts the node's agent off the controller (its worker's proxy forwards nothing) for `forMs`, and on
   * until another node runs one of the shards it held (at most three leases more: the hand-on is what
   * the partition is for, and a controller restart meanwhile counts the cut node's lease afresh), without
   * waiting for the heal. Its process runs on: the agent's fail-safe stops its shards (slowly) while the
   * controller expires the node and hands them on.
   */
  private async partition(node: string, forMs: number): Promise<void> {
    const process = this.spec.get(node)!.process
    const held = [...this.deps.ledger.runningOn(node)]
    const from = sharedNow()
    await this.deps.pool.partition(process)
    this.cut.add(node)
    const handedOn = () => held.some(([shard, count]) => [...this.deps.ledger.running].some(([other, map]) => other !== node && map.get(shard) === count))
    const healed = sleep(forMs).then(async () => {
      await waitFor(handedOn, 3 * this.deps.leaseMs)
      await this.deps.pool.heal(process)
      this.partitions.push({ node, from, to: sharedNow() })
      this.cut.delete(node)
    })
    this.thaws.push(healed)
    this.heals.push(healed)
  }

  /** Live nodes that can answer the controller now (not frozen, not cut off). */
  private reachable(): string[] {
    return this.expectedLive().map((n) => n.name).filter((n) => !this.frozen.has(n) && !this.cut.has(n))
  }

  /**
   * The controller stopped (kill -9 or SIGTERM), down `downMs`, and started on the same port and state
   * with another total_shards: every shard number now means other guilds, so the controller raises a
   * reshard barrier (no Identify until every restored node reported the new generation). Begins once
   * every partition has healed; complete once every reachable live node has accepted the new generation
   * (or two leases passed). No restart_moved check: a reshard moves everything by design; the
   * guild-coverage check judges it.
   */
  private async reshard(event: Extract<ChurnEvent, { kind: 'reshard' }>): Promise<void> {
    // After any partition: its node's shards are then handed on under one count, as its figures assume.
    await Promise.all(this.heals)
    const before = await this.deps.operator.plan()
    const expected = this.reachable()
    const stoppedAt = sharedNow()
    if (event.signal === 'SIGKILL') await this.deps.controller.kill9()
    else await this.deps.controller.stop()
    await sleep(event.downMs)
    await this.deps.controller.start([], { total_shards: event.totalShards })
    const listeningAt = sharedNow()
    const after = await this.servedPlan()
    const fromShards = this.totalShards
    this.totalShards = event.totalShards
    const onNew = (n: string) => (this.deps.ledger.plans.get(n)?.generation ?? -Infinity) >= after.generation
    const all = await waitFor(() => expected.every(onNew), 2 * this.deps.leaseMs)
    this.reshards.push({
      signal: event.signal, stoppedAt, listeningAt, fromShards, toShards: event.totalShards, planTotalShards: after.total_shards,
      generationBefore: before.generation, generationAfter: after.generation, expected, allOnNewPlanMs: all ? sharedNow() - listeningAt : null,
    })
    this.deps.log(`controller stopped (${event.signal}) and listening again with ${after.total_shards} shards (was ${fromShards}) after ${Math.round(listeningAt - stoppedAt)} ms`)
  }

  /**
   * kill -9, a pause of `downMs`, a start on the same port and state. Complete once every live node has
   * renewed (or a lease passed): the plans read just before the kill and just after the start must be
   * the same, and so must every node's first renewal (SPEC "Running": a restart moves no shard).
   */
  private async restart(downMs: number): Promise<void> {
    const before = await this.deps.operator.plan()
    const expected = this.reachable()
    const killedAt = sharedNow()
    await this.deps.controller.kill9()
    // Marked once the old process is gone: a change it audited between the plan read and the kill is its
    // own (the window the baseline is rebased for), not a re-plan on restore by the new one.
    const marks = this.auditMarks(this.deps.auditLogs.map((_, i) => i))
    await sleep(downMs)
    await this.deps.controller.start()
    const listeningAt = sharedNow()
    const event = this.deps.controller.replicas.length > 1 ? 'leader_elected' : 'controller_start'
    const judged = await this.judgeUnmoved('restart', before, expected, killedAt, listeningAt, () => this.restored(marks, event))
    this.restarts.push({ killedAt, listeningAt, expected, ...judged })
    this.deps.log(`controller killed (-9) and listening again after ${Math.round(listeningAt - killedAt)} ms; shards moved: ${judged.moved}`)
  }

  /**
   * kill -9 of the leading HA replica; complete once the other one serves the plan, the killed one is
   * started again (it joins as a follower) and every live node has renewed (or a lease passed). Judged
   * as a restart: the same plan before and after, and every node's first renewal the plan of before
   * (SPEC "High availability": a take-over moves no shard).
   */
  private async takeover(): Promise<void> {
    const { controller, operator } = this.deps
    const before = await this.servedPlan()
    const leaderPort = await operator.leaderPort()
    const killed = controller.ports.findIndex((p) => p === leaderPort)
    if (killed < 0) throw new Error('a take-over found no leading replica')
    const expected = this.reachable()
    const killedAt = sharedNow()
    await controller.replicas[killed]!.kill9()
    // the others' logs: the one that takes over announces there what it restored (no replica leads
    // before the killed one's etcd lease ran out, so nothing of the take-over precedes the marks)
    const marks = this.auditMarks(controller.replicas.map((_, i) => i).filter((i) => i !== killed))
    // Served again: the plan answered (by the other replica: the killed one's port is closed).
    await this.servedPlan()
    const servedAt = sharedNow()
    await controller.replicas[killed]!.start()
    const rejoinedAt = sharedNow()
    const judged = await this.judgeUnmoved('take-over', before, expected, killedAt, servedAt, () => this.restored(marks, 'leader_elected'))
    this.takeovers.push({ killedAt, listeningAt: servedAt, rejoinedAt, killed, expected, ...judged })
    this.deps.log(`leading replica ${killed + 1} killed (-9); the other served after ${Math.round(servedAt - killedAt)} ms; shards moved: ${judged.moved}`)
  }

  /** The plan once a controller serves it (HA: once a replica leads), retried for two leases. */
  private async servedPlan(): Promise<OperatorPlan> {
    const deadline = sharedNow() + 2 * this.deps.leaseMs
    for (;;) {
      try {
        return await this.deps.operator.plan()
      } catch (err) {
        if (sharedNow() > deadline) throw err
        await sleep(POLL_MS)
      }
    }
  }

  /** Where each chosen replica's audit log ends now. */
  private auditMarks(replicas: readonly number[]): { path: string; offset: number }[] {
    return replicas.map((i) => this.deps.auditLogs[i]).filter((p): p is string => p !== undefined).map((path) => ({ path, offset: auditSize(path) }))
  }

  /** What the process started after the marks announced in its audit log (polled briefly: the line may lag the answer). */
  private async restored(marks: readonly { path: string; offset: number }[], event: 'leader_elected' | 'controller_start'): Promise<Restored> {
    const deadline = sharedNow() + 2000
    for (;;) {
      const found = marks.map((m) => restoredFrom(auditSince(m.path, m.offset), event))
      const hit = found.find((r) => r.generation !== null)
      if (hit !== undefined || sharedNow() > deadline) return hit ?? { generation: null, replannedOnRestore: found.some((r) => r.replannedOnRestore) }
      await sleep(POLL_MS)
    }
  }

  /**
   * The restart rule, for a restart and a take-over alike: the plan served after `upAt` is the one the
   * killed process had made durable, and every expected node's first renewal after it carries its range
   * of that plan; else `restart_moved`. That plan is the one read just before the kill (`before`) unless
   * the new process restored a newer generation (restart-baseline.ts: the controller moved on between
   * the read and the kill; the ranges are then those nodes accepted under it before the kill).
   */
  private async judgeUnmoved(
    what: string, before: OperatorPlan, expected: readonly string[], killedAt: number, upAt: number, restoredNow: () => Promise<Restored>,
  ): Promise<Pick<RestartNote, 'generationBefore' | 'rebasedTo' | 'generationAfter' | 'moved' | 'changedRenewals'>> {
    const after = await this.servedPlan()
    const restored = await restoredNow()
    const baseline = baselineOf(before, restored.generation, this.deps.ledger.records, killedAt)
    const renewed = (n: string) => (this.deps.ledger.plans.get(n)?.t ?? -Infinity) >= upAt
    await waitFor(() => expected.every(renewed), this.deps.leaseMs)
    // Each node's FIRST plan after the restart is judged, not its latest. A first plan of a NEWER
    // generation is no fault of the restart: the plan served right after it was the baseline, so the change
    // came later, from churn that goes on meanwhile (a paused or cut-off node's lease running out while
    // the others renew). What the restart must not do is serve an older plan, or the same generation
    // with another range, or drop a node that renewed (checked on the plan once all have renewed).
    const firstAfter = firstPlansSince(this.deps.ledger.records, upAt)
    const changedRenewals = expected.filter((n) => firstAfter.has(n) && firstAfter.get(n)!.generation <= baseline.generation && !matchesBaseline(baseline, n, firstAfter.get(n)!)).length
    const settled = await this.servedPlan()
    const dropped = expected.filter((n) => baseline.ranges.has(n) && !settled.nodes.some((m) => m.node_id === n)).length
    const moved = movedFrom(baseline, after)
    const faults: string[] = []
    if (restored.replannedOnRestore) faults.push('the new process changed the plan generation before it announced what it restored')
    if (restored.generation !== null && restored.generation < before.generation) faults.push(`it restored generation ${restored.generation}, older than the ${before.generation} served before the kill`)
    if (moved > 0 || baseline.generation !== after.generation || changedRenewals > 0 || dropped > 0 || faults.length > 0) {
      const rebase = baseline.rebased ? ` (rebased: generation ${baseline.generation} was made durable between the read and the kill; ${baseline.ranges.size} nodes had accepted it)` : ''
      const detail = `generation ${before.generation} → ${after.generation}${rebase}, ${moved} shards moved, ${changedRenewals} nodes renewed with another plan, ${dropped} renewing nodes dropped${faults.map((f) => `; ${f}`).join('')}`
      this.deps.violations.push({ kind: 'restart_moved', detail: `the ${what} at ${Math.round(killedAt)}: ${detail}` })
    }
    return { generationBefore: before.generation, rebasedTo: baseline.rebased ? baseline.generation : null, generationAfter: after.generation, moved, changedRenewals }
  }
}

/** Per node, the first plan it accepted at or after `since` (the records are in arrival order, not time order). */
function firstPlansSince(records: readonly FleetRecord[], since: number): Map<string, { t: number; generation: number; assigned: readonly number[] }> {
  const first = new Map<string, { t: number; generation: number; assigned: readonly number[] }>()
  for (const record of records) {
    if (record.kind !== 'event' || record.event.type !== 'plan_accepted' || record.t < since) continue
    const seen = first.get(record.node)
    if (seen === undefined || record.t < seen.t) first.set(record.node, { t: record.t, generation: record.event.generation, assigned: record.event.assigned })
  }
  return first
}
