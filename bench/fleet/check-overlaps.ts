/**
 * "No shard running on two nodes at any moment", on the one shared timeline, and what frozen and revoked
 * nodes do with their shards. Pure: it reads the records and the orchestrator's own notes.
 *
 * A frozen process (SIGSTOP) runs nothing, its shards included (the callbacks live in it, as a gateway
 * client in the agent's process would): its shards count as not running from the freeze until it wakes,
 * and a woken agent that lost its authority while frozen gets `wakeGraceMs` to stop them. A stop that
 * comes later is a violation, and the shard counts as running from the wake on (overlaps then show).
 *
 * SPEC "Handoff safety" lets the controller hand a revoked node's shards on at once, so a new owner may
 * start before the revoked node has learned of its revocation (at its next request). Such overlaps are
 * reported apart (`revokedOverlaps`), not counted as violations; the revoked node must still stop its
 * shards within the CRL pick-up time (2 s) plus one lease, and start none after the pick-up.
 */
import type { FleetRecord } from './protocol.js'
import type { Violation } from './violations.js'

/** A process frozen from `from` to `to` (shared timeline), with the nodes it runs. */
export interface Freeze {
  readonly nodes: readonly string[]
  readonly from: number
  readonly to: number
}

/** A revocation: when `pxe-pki revoke` was started, and when it had rewritten the CRL. */
export interface Revocation {
  readonly node: string
  readonly requestedAt: number
  readonly at: number
}

/** What the check needs. */
export interface OverlapInput {
  readonly records: readonly FleetRecord[]
  readonly freezes: readonly Freeze[]
  readonly revocations: readonly Revocation[]
  /** Where open intervals end (the end of the run). */
  readonly endT: number
  readonly wakeGraceMs: number
  readonly leaseMs: number
}

/** An overlap allowed by SPEC "Handoff safety" because the earlier holder was revoked. */
export interface RevokedOverlap {
  readonly shard: number
  readonly revoked: string
  readonly next: string
  readonly ms: number
}

/** One freeze as the summary shows it. */
export interface PauseFigures {
  readonly frozenMs: number
  readonly heldShards: number
  readonly wakeToStopMs: number | null
}

/** One revocation as the summary shows it. */
export interface RevocationFigures {
  readonly node: string
  readonly heldShards: number
  readonly lastStopMs: number | null
}

/** The check's findings and timings. */
export interface OverlapReport {
  readonly violations: Violation[]
  readonly revokedOverlaps: RevokedOverlap[]
  /** Per freeze: how long, shards held when it began, ms from the wake to the last of them stopped. */
  readonly pauses: PauseFigures[]
  /** Per revocation: shards held then, ms from the revocation to the last of them stopped. */
  readonly revocations: RevocationFigures[]
  /** Holding intervals checked. */
  readonly intervals: number
}

/** The SPEC's bound for a running controller to act on a rewritten CRL. */
export const CRL_PICKUP_MS = 2000

interface Interval {
  readonly node: string
  readonly shard: number
  readonly start: number
  readonly stop: number
}

interface Segment {
  readonly node: string
  readonly from: number
  readonly to: number
}

/** Pairs every start with the next stop of the same node and shard; an unmatched start runs to `endT`. */
export function holdingIntervals(records: readonly FleetRecord[], endT: number): Interval[] {
  const shardRecords = records.filter((r) => r.kind === 'start' || r.kind === 'stop').sort((a, b) => a.t - b.t)
  const open = new Map<string, { node: string; shard: number; start: number }>()
  const out: Interval[] = []
  for (const r of shardRecords) {
    if (r.kind !== 'start' && r.kind !== 'stop') continue
    const key = `${r.node}#${r.shard}`
    if (r.kind === 'start') {
      if (!open.has(key)) open.set(key, { node: r.node, shard: r.shard, start: r.t })
      continue
    }
    const started = open.get(key)
    if (started === undefined) continue
    open.delete(key)
    out.push({ ...started, stop: r.t })
  }
  for (const started of open.values()) out.push({ ...started, stop: endT })
  return out
}

/** The parts of an interval during which the shard really ran, given its node's freezes. */
function runningSegments(iv: Interval, freezes: readonly Freeze[], input: OverlapInput, report: OverlapReport): Segment[] {
  let segments: Segment[] = [{ node: iv.node, from: iv.start, to: iv.stop }]
  for (const f of freezes) {
    if (!f.nodes.includes(iv.node) || f.from >= iv.stop || f.to <= iv.start) continue
    const lostAuthority = f.to - f.from > input.leaseMs
    const stoppedOnWake = iv.stop <= f.to + input.wakeGraceMs
    if (lostAuthority && iv.start < f.from && !stoppedOnWake) {
      report.violations.push({ kind: 'late_stop_after_wake', detail: `${iv.node} woke after ${Math.round(f.to - f.from)} ms frozen and stopped shard ${iv.shard} only ${Math.round(iv.stop - f.to)} ms later` })
    }
    segments = segments.flatMap((s) => {
      const parts: Segment[] = []
      if (s.from < f.from) parts.push({ ...s, to: Math.min(s.to, f.from) })
      if (!stoppedOnWake && s.to > f.to) parts.push({ ...s, from: Math.max(s.from, f.to) })
      return parts
    })
  }
  return segments
}

/** Runs the check. */
export function checkOverlaps(input: OverlapInput): OverlapReport {
  const report: OverlapReport = { violations: [], revokedOverlaps: [], pauses: [], revocations: [], intervals: 0 }
  const intervals = holdingIntervals(input.records, input.endT)
  const byShard = new Map<number, Segment[]>()
  for (const iv of intervals) {
    const segments = runningSegments(iv, input.freezes, input, report)
    let list = byShard.get(iv.shard)
    if (list === undefined) byShard.set(iv.shard, (list = []))
    list.push(...segments)
  }
  // From the moment the CLI started: the controller may read the new CRL before the CLI has exited.
  const revokedAt = new Map(input.revocations.map((r) => [r.node, r.requestedAt]))
  for (const [shard, segments] of byShard) sweep(shard, segments, revokedAt, report)
  wakeTimings(intervals, input, report)
  revocationChecks(intervals, input, report)
  return { ...report, intervals: intervals.length }
}

/** Finds every pair of segments of different nodes that overlap in time. */
function sweep(shard: number, segments: Segment[], revokedAt: ReadonlyMap<string, number>, report: OverlapReport): void {
  segments.sort((a, b) => a.from - b.from)
  const active: Segment[] = []
  for (const seg of segments) {
    for (let i = active.length - 1; i >= 0; i--) if (active[i]!.to <= seg.from) active.splice(i, 1)
    for (const other of active) {
      if (other.node === seg.node) continue
      const ms = Math.min(other.to, seg.to) - seg.from
      const revoked = revokedAt.get(other.node)
      if (revoked !== undefined && revoked <= seg.from) {
        report.revokedOverlaps.push({ shard, revoked: other.node, next: seg.node, ms })
      } else {
        report.violations.push({ kind: 'overlap', detail: `shard ${shard}: ${seg.node} started while ${other.node} ran it (${ms.toFixed(1)} ms together)` })
      }
    }
    active.push(seg)
  }
}

function wakeTimings(intervals: readonly Interval[], input: OverlapInput, report: OverlapReport): void {
  for (const f of input.freezes) {
    const held = intervals.filter((iv) => f.nodes.includes(iv.node) && iv.start < f.from && iv.stop > f.from)
    const wakeToStopMs = held.length === 0 ? null : Math.max(...held.map((iv) => iv.stop - f.to))
    report.pauses.push({ frozenMs: f.to - f.from, heldShards: held.length, wakeToStopMs })
  }
}

function revocationChecks(intervals: readonly Interval[], input: OverlapInput, report: OverlapReport): void {
  for (const { node, at } of input.revocations) {
    const mine = intervals.filter((iv) => iv.node === node)
    const deadline = at + CRL_PICKUP_MS + input.leaseMs
    for (const iv of mine) {
      if (iv.start > at + CRL_PICKUP_MS) report.violations.push({ kind: 'revoked_started', detail: `${node} started shard ${iv.shard} ${Math.round(iv.start - at)} ms after its revocation` })
      if (iv.stop > deadline) report.violations.push({ kind: 'revoked_kept_running', detail: `${node} still ran shard ${iv.shard} ${Math.round(iv.stop - at)} ms after its revocation` })
    }
    const held = mine.filter((iv) => iv.start <= at && iv.stop > at)
    report.revocations.push({ node, heldShards: held.length, lastStopMs: held.length === 0 ? null : Math.max(...held.map((iv) => iv.stop - at)) })
  }
}
