/**
 * What a restart or a take-over is judged against (SPEC "High availability" and "Running": it moves no
 * shard). The rule is about the plan the killed process had made durable, and the plan read over the
 * operator API just before the kill is that plan unless the controller moved on in between: a lease
 * that ran out, a healed node checking in again. On a loaded machine the read, the leader lookup and the
 * kill take long enough for that to happen now and then (CI saw generation 8 read and 9 served after,
 * most likely the expiry of a node that had left: CI keeps no audit log to tell). The new process audits
 * the generation it restored (`leader_elected` with HA, `controller_start` without), so the judgement
 * rebases on it: the ranges are then those the nodes accepted under that generation before the kill,
 * as far as any node did.
 */
import { openSync, readSync, closeSync, fstatSync, statSync } from 'node:fs'
import type { OperatorPlan } from './operator-client.js'
import type { FleetRecord } from './protocol.js'

/** The plan a restart is judged against. */
export interface Baseline {
  readonly generation: number
  /** Known ranges by node: every node of the plan read before, or (rebased) those that accepted `generation` before the kill. */
  readonly ranges: ReadonlyMap<string, readonly number[]>
  /** True when the controller made a newer generation durable between the read and the kill. */
  readonly rebased: boolean
}

/** How the new process started on the state it found, as its audit log tells. */
export interface Restored {
  /** The generation it restored (null: no such line yet). */
  readonly generation: number | null
  /** It changed the plan generation before it announced itself: a re-plan on restore. */
  readonly replannedOnRestore: boolean
}

/** The size of an audit log now (0 when it does not exist yet): where to read the new process's lines from. */
export function auditSize(path: string): number {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}

/** The text appended to `path` since byte `offset` ('' when none). */
export function auditSince(path: string, offset: number): string {
  let fd: number
  try {
    fd = openSync(path, 'r')
  } catch {
    return ''
  }
  try {
    const size = fstatSync(fd).size
    if (size <= offset) return ''
    const buf = Buffer.alloc(size - offset)
    readSync(fd, buf, 0, buf.length, offset)
    return buf.toString('utf8')
  } finally {
    closeSync(fd)
  }
}

/**
 * From the audit lines a process wrote after it was started again: the generation it announced with
 * `event` (`leader_elected` or `controller_start`), and whether a `plan_generation_changed` came before.
 */
export function restoredFrom(text: string, event: 'leader_elected' | 'controller_start'): Restored {
  let replanned = false
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue
    let entry: { event?: unknown; generation?: unknown }
    try {
      entry = JSON.parse(line) as typeof entry
    } catch {
      continue // a line still being written
    }
    if (entry.event === 'plan_generation_changed') replanned = true
    if (entry.event === event && typeof entry.generation === 'number') return { generation: entry.generation, replannedOnRestore: replanned }
  }
  return { generation: null, replannedOnRestore: replanned }
}

/** Every node's range in an operator plan, as shard lists. */
function planRanges(plan: OperatorPlan): Map<string, number[]> {
  return new Map(plan.nodes.map((n) => [n.node_id, Array.from({ length: n.range_count }, (_, i) => n.range_start + i)]))
}

/**
 * The plan read before the kill, or, when the new process restored a newer generation, the ranges nodes
 * accepted under it before `killedAt` (records are in arrival order, so the latest acceptance wins).
 */
export function baselineOf(before: OperatorPlan, restored: number | null, records: readonly FleetRecord[], killedAt: number): Baseline {
  if (restored === null || restored <= before.generation) return { generation: before.generation, ranges: planRanges(before), rebased: false }
  const ranges = new Map<string, readonly number[]>()
  const at = new Map<string, number>()
  for (const r of records) {
    if (r.kind !== 'event' || r.event.type !== 'plan_accepted' || r.event.generation !== restored || r.t >= killedAt) continue
    if ((at.get(r.node) ?? -Infinity) > r.t) continue
    at.set(r.node, r.t)
    ranges.set(r.node, r.event.assigned)
  }
  return { generation: restored, ranges, rebased: true }
}

/** Shards of the baseline's known ranges whose owner in `after` differs. */
export function movedFrom(baseline: Baseline, after: OperatorPlan): number {
  const owner = new Map<number, string>()
  for (const n of after.nodes) for (let s = n.range_start; s < n.range_start + n.range_count; s++) owner.set(s, n.node_id)
  let moved = 0
  for (const [node, shards] of baseline.ranges) for (const s of shards) if (owner.get(s) !== node) moved += 1
  return moved
}

/** True when `accepted` is the node's range and generation in the baseline (unknown range: not judged, true). */
export function matchesBaseline(baseline: Baseline, node: string, accepted: { generation: number; assigned: readonly number[] }): boolean {
  if (accepted.generation !== baseline.generation) return false
  const range = baseline.ranges.get(node)
  if (range === undefined) return baseline.rebased
  return accepted.assigned.length === range.length && accepted.assigned.every((s, i) => s === range[i])
}
