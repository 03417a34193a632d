/**
 * The figures of a rolling reboot (pure): every interruption of a shard on the timeline — the old owner's
 * stop until a session of the shard serves again (READY or RESUMED) — attributed to the reboot during
 * which it began, and the table printed from them.
 */
import type { GatewayFigures } from './gateway-run.js'
import { percentile } from './metrics.js'
import type { FleetRecord } from './protocol.js'
import { VIOLATION_KINDS, type Violation, type ViolationKind } from './violations.js'

/** A shard that stopped on one node and served again (on it or on another). */
export interface Interruption {
  readonly shard: number
  readonly from: string
  readonly to: string
  /** The stop's reason: `leave` (the node left), `killed` (its process was killed), `plan` (a rebalance). */
  readonly reason: string
  readonly stoppedAt: number
  readonly servingAt: number
  readonly downtimeMs: number
  /** How the new session began: READY after an IDENTIFY, or RESUMED. */
  readonly mode: 'identify' | 'resume'
}

/**
 * Pairs each stop of a running session (not a failed start) with the next READY or RESUMED of the same
 * shard; stops before `since` are left out. A READY or RESUMED with no stop before it (a cold start, a
 * reconnect that resumed on the same node) is no interruption.
 */
export function interruptions(records: readonly FleetRecord[], since: number): Interruption[] {
  type Stop = Extract<FleetRecord, { kind: 'stop' }>
  type Running = Extract<FleetRecord, { kind: 'running' }>
  const sorted = records.filter((r): r is Stop | Running => r.kind === 'running' || (r.kind === 'stop' && r.reason !== 'start_failed')).sort((a, b) => a.t - b.t)
  const pending = new Map<number, Stop>()
  const out: Interruption[] = []
  for (const r of sorted) {
    if (r.kind === 'stop') {
      if (!pending.has(r.shard)) pending.set(r.shard, r)
      continue
    }
    const stop = pending.get(r.shard)
    if (stop === undefined) continue
    pending.delete(r.shard)
    if (stop.t < since) continue
    out.push({ shard: r.shard, from: stop.node, to: r.node, reason: stop.reason, stoppedAt: stop.t, servingAt: r.t, downtimeMs: r.t - stop.t, mode: r.mode })
  }
  return out
}

/** Median and worst of some downtimes, and how many went by RESUME and by IDENTIFY. */
export interface MoveStats {
  readonly count: number
  readonly resumed: number
  readonly identified: number
  readonly medianMs: number | null
  readonly maxMs: number | null
}

/** The stats of a set of interruptions. */
export function moveStats(list: readonly Interruption[]): MoveStats {
  const sorted = list.map((i) => i.downtimeMs).sort((a, b) => a - b)
  return {
    count: list.length,
    resumed: list.filter((i) => i.mode === 'resume').length,
    identified: list.filter((i) => i.mode === 'identify').length,
    medianMs: percentile(sorted, 50),
    maxMs: percentile(sorted, 100),
  }
}

/** One node's reboot as the orchestrator carried it out (shared timeline). */
export interface RebootNote {
  readonly node: string
  /** When the signal was sent. */
  readonly signalledAt: number
  /** When its process had exited (after the leave, with SIGTERM). */
  readonly goneAt: number
  /** Its exit code or signal. */
  readonly exit: number | string
  /** When the new process's agent started. */
  readonly startedAt: number
  /** When the new agent accepted its first plan (checked in), or null. */
  readonly backAt: number | null
  /** When the fleet had converged again with every shard serving, or null. */
  readonly convergedAt: number | null
}

/** One reboot's line of the summary. */
export interface RebootFigures {
  readonly node: string
  readonly exit: number | string
  /** From the signal until the process was gone (ms). */
  readonly goneAfterMs: number
  /** From the new agent's start until it accepted a plan, and until the fleet converged (ms). */
  readonly backAfterMs: number | null
  readonly convergedAfterMs: number | null
  /** Its shards moving away (stopped by the leave or the kill), and the rebalance after (plan moves, its return included). */
  readonly away: MoveStats
  readonly rebalance: MoveStats
}

/** What a rolling reboot reports. */
export interface RollingSummary {
  readonly signal: 'SIGTERM' | 'SIGKILL'
  readonly nodes: number
  readonly shards: number
  readonly maxConcurrency: number
  readonly capacity: number
  readonly leaseSeconds: number
  readonly identifyIntervalMs: number
  readonly rebootMs: number
  readonly planner: 'contiguous' | 'stable'
  readonly eventsPerSecond: number
  /** Seconds from the start of the agents until every shard served, the rolling phase, and the whole run. */
  readonly coldStartS: number | null
  readonly rollingS: number
  readonly runSeconds: number
  readonly reboots: readonly RebootFigures[]
  /** Every interruption of the rolling phase that moved a shard to another node. */
  readonly moves: MoveStats
  /** Of those, the rebooted nodes' own shards moving away (leave / kill), and the rebalances. */
  readonly away: MoveStats
  readonly rebalance: MoveStats
  /** Shards that stopped and served again on the same node (a killed node back before its lease ran out). */
  readonly sameNode: MoveStats
  /** IDENTIFYs the gateway received during the rolling phase, and on how many distinct shards. */
  readonly rollingIdentifies: number
  readonly rollingIdentifiedShards: number
  readonly rollingResumes: number
  /** Leaves the agents sent and got answered, and those that failed. */
  readonly leaves: { readonly answered: number; readonly failed: number }
  readonly gateway: GatewayFigures
  readonly violationsByKind: Record<ViolationKind, number>
  readonly violations: readonly Violation[]
}

/** The reboot during which each interruption began, and the stats per reboot. */
export function rebootFigures(notes: readonly RebootNote[], list: readonly Interruption[], endT: number): RebootFigures[] {
  return notes.map((note, i) => {
    const until = notes[i + 1]?.signalledAt ?? endT
    const mine = list.filter((x) => x.from !== x.to && x.stoppedAt >= note.signalledAt && x.stoppedAt < until)
    return {
      node: note.node,
      exit: note.exit,
      goneAfterMs: note.goneAt - note.signalledAt,
      backAfterMs: note.backAt === null ? null : note.backAt - note.startedAt,
      convergedAfterMs: note.convergedAt === null ? null : note.convergedAt - note.startedAt,
      away: moveStats(mine.filter((x) => x.from === note.node && x.reason !== 'plan')),
      rebalance: moveStats(mine.filter((x) => x.reason === 'plan')),
    }
  })
}

const ms = (v: number | null | undefined): string => (v === null || v === undefined ? '-' : `${Math.round(v)} ms`)
const row = (label: string, value: string | number): string => `  ${label.padEnd(34)} ${value}`
const stats = (m: MoveStats): string => (m.count === 0 ? '0' : `${m.count} (RESUME ${m.resumed}, IDENTIFY ${m.identified}); downtime median ${ms(m.medianMs)}, max ${ms(m.maxMs)}`)

/** The summary table, line by line. */
export function formatRolling(s: RollingSummary): string[] {
  const total = Object.values(s.violationsByKind).reduce((a, b) => a + b, 0)
  const d = s.gateway.delivery
  const mode = s.signal === 'SIGTERM' ? 'SIGTERM (each agent leaves)' : 'SIGKILL (the control: no stop, no leave)'
  return [
    `rolling reboot, ${mode}: ${s.nodes} nodes × capacity ${s.capacity}, ${s.shards} shards, max_concurrency ${s.maxConcurrency}, lease ${s.leaseSeconds} s (check-in every ${(s.leaseSeconds / 3).toFixed(1)} s), identify_interval_ms ${s.identifyIntervalMs}, each node down ${(s.rebootMs / 1000).toFixed(1)} s, planner ${s.planner}, ${s.eventsPerSecond} test events/s a session`,
    row('cold start (every shard serving)', s.coldStartS === null ? 'NO' : `${s.coldStartS.toFixed(1)} s`),
    ...s.reboots.map((r, i) => row(`reboot ${i + 1} (${r.node}, exit ${r.exit})`, `gone after ${ms(r.goneAfterMs)}; new agent checked in after ${ms(r.backAfterMs)}, fleet converged after ${ms(r.convergedAfterMs)}; its shards away ${stats(r.away)}; rebalance ${stats(r.rebalance)}`)),
    row('moves (rolling phase)', stats(s.moves)),
    row('  the rebooted nodes\' shards away', stats(s.away)),
    row('  rebalance (plan moves, returns)', stats(s.rebalance)),
    ...(s.sameNode.count === 0 ? [] : [row('  stopped and back on the same node', stats(s.sameNode))]),
    row('target per move', `within one check-in interval (${((s.leaseSeconds * 1000) / 3 / 1000).toFixed(1)} s) plus its RESUME`),
    row('gateway in the rolling phase', `IDENTIFY ${s.rollingIdentifies} (on ${s.rollingIdentifiedShards} shards), RESUME ${s.rollingResumes}`),
    row('leaves answered / failed', `${s.leaves.answered} / ${s.leaves.failed}`),
    row('test events', `${d.expected} produced, ${d.delivered} delivered; lost ${d.lost}, duplicated ${d.duplicated}, unknown ${d.unknown} (${d.undeliverable} died with a session nobody resumed${d.undeliverable === 0 ? '' : `: ${Object.entries(d.undeliverableBy).map(([k, v]) => `${k} ${v}`).join(', ')}`})`),
    row('emulator breaches', Object.entries(s.gateway.breaches).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'),
    row('wall time', `rolling phase ${s.rollingS.toFixed(1)} s, whole run ${s.runSeconds.toFixed(1)} s`),
    `  violations: ${total}`,
    ...VIOLATION_KINDS.filter((k) => s.violationsByKind[k] > 0).map((k) => `    ${k.padEnd(24)} ${s.violationsByKind[k]}`),
    ...s.violations.slice(0, 20).map((v) => `  ! ${v.kind}: ${v.detail}`),
  ]
}
