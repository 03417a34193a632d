/**
 * "No guild served by two running sessions at any moment", on the one shared timeline, and what frozen
 * and revoked nodes do with their shards. Pure: it reads the records and the orchestrator's own notes.
 *
 * Each session carries the shard count it was started with, so that the check holds across a reshard:
 * shard a of Sa and shard b of Sb serve a common guild iff a ≡ b (mod gcd(Sa, Sb)) (src/core/snowflake.ts), on
 * two nodes or on one. Two sessions of one count overlap only on the same shard number (`overlap`, the
 * classic "a shard on two nodes"); of two counts, `guild_overlap` names a guild both served. Sessions are
 * grouped by shard % G, G the gcd of every count in the run (a common guild needs the same remainder),
 * and each group is swept in time with the exact test among the sessions active together.
 *
 * A frozen process (SIGSTOP) runs nothing, its shards included (the callbacks live in it, as a gateway
 * client in the agent's process would): its shards count as not running from the freeze until it wakes,
 * and a woken agent that lost its authority while frozen gets `wakeGraceMs` to stop them. A stop that
 * comes later is a violation, and the shard counts as running from the wake on (overlaps then show).
 *
 * SPEC "Leases": a revoked node's shards move at once, but their new owners are granted nothing until the
 * revoked node's lease has run out, so a new owner never starts one before the revoked node stopped it.
 * An overlap after a revocation is a violation like any other (and is also listed in `revokedOverlaps`);
 * the revoked node must stop its shards within the CRL pick-up time (2 s) plus one lease, and start none
 * after the pick-up.
 */
import { commonGuild, gcd } from '../../src/core/snowflake.js'
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
  /** Live reshards: their two sets run side by side by design (see sweep). */
  readonly liveReshards?: readonly LiveReshardWindow[]
}

/** A live reshard: from `from` to `to` shards, posted at `postedAt`, switched at `switchedAt` (or null). */
export interface LiveReshardWindow {
  readonly from: number
  readonly to: number
  readonly postedAt: number
  readonly switchedAt: number | null
}

/** An overlap with an earlier holder that was revoked (a violation too: SPEC "Leases"). */
export interface RevokedOverlap {
  /** The next holder's shard (and its count). */
  readonly shard: number
  readonly totalShards: number
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
  /** Per revocation: shards held when `pxe-pki revoke` started, ms from then to the last of them stopped. */
  readonly revocations: RevocationFigures[]
  /** Holding intervals checked. */
  readonly intervals: number
  /** Guild overlaps between a live reshard's two sets, as Discord allows for resharding (not violations). */
  liveReshardOverlaps: number
}

/** The SPEC's bound for a running controller to act on a rewritten CRL. */
export const CRL_PICKUP_MS = 2000

/** One session: a shard of a shard count, run by one node from its start to its stop. */
export interface Interval {
  readonly node: string
  readonly shard: number
  readonly totalShards: number
  readonly start: number
  readonly stop: number
}

interface Segment {
  readonly node: string
  readonly shard: number
  readonly totalShards: number
  readonly from: number
  readonly to: number
}

/**
 * Pairs every start with the next stop of the same node, shard and count; an unmatched start runs to
 * `endT`. Keyed by the count too: an agent that started shard 5 of 32 while its 5 of 64 still ran
 * (a reshard done wrong) holds two sessions, and the check must see both.
 */
export function holdingIntervals(records: readonly FleetRecord[], endT: number): Interval[] {
  const shardRecords = records.filter((r) => r.kind === 'start' || r.kind === 'stop').sort((a, b) => a.t - b.t)
  const open = new Map<string, { node: string; shard: number; totalShards: number; start: number }>()
  const out: Interval[] = []
  for (const r of shardRecords) {
    if (r.kind !== 'start' && r.kind !== 'stop') continue
    const key = `${r.node}#${r.shard}/${r.totalShards}`
    if (r.kind === 'start') {
      if (!open.has(key)) open.set(key, { node: r.node, shard: r.shard, totalShards: r.totalShards, start: r.t })
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
  let segments: Segment[] = [{ node: iv.node, shard: iv.shard, totalShards: iv.totalShards, from: iv.start, to: iv.stop }]
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
  const report: OverlapReport = { violations: [], revokedOverlaps: [], pauses: [], revocations: [], intervals: 0, liveReshardOverlaps: 0 }
  const intervals = holdingIntervals(input.records, input.endT)
  // Sessions that share a guild have the same shard % G (G divides every gcd of two counts).
  const G = intervals.reduce((g, iv) => gcd(g, iv.totalShards), 0)
  const byRemainder = new Map<number, Segment[]>()
  for (const iv of intervals) {
    const segments = runningSegments(iv, input.freezes, input, report)
    let list = byRemainder.get(iv.shard % G)
    if (list === undefined) byRemainder.set(iv.shard % G, (list = []))
    list.push(...segments)
  }
  // From the moment the CLI started: the controller may read the new CRL before the CLI has exited.
  const revokedAt = new Map(input.revocations.map((r) => [r.node, r.requestedAt]))
  const expected = liveReshardAllowance(input)
  for (const segments of byRemainder.values()) sweep(segments, revokedAt, report, expected)
  wakeTimings(intervals, input, report)
  revocationChecks(intervals, input, report)
  return { ...report, intervals: intervals.length }
}

/** Finds every pair of segments, active together, that serve a common guild. */
function sweep(segments: Segment[], revokedAt: ReadonlyMap<string, number>, report: OverlapReport, expected: (a: Segment, b: Segment) => boolean = () => false): void {
  segments.sort((a, b) => a.from - b.from)
  const active: Segment[] = []
  for (const seg of segments) {
    for (let i = active.length - 1; i >= 0; i--) if (active[i]!.to <= seg.from) active.splice(i, 1)
    for (const other of active) {
      // Segments of one session (split by a freeze) never touch; one count on one node: other guilds.
      if (other.node === seg.node && other.totalShards === seg.totalShards) continue
      const guild = commonGuild(other.shard, other.totalShards, seg.shard, seg.totalShards)
      if (guild === null) continue
      const ms = Math.min(other.to, seg.to) - seg.from
      const revoked = revokedAt.get(other.node)
      if (revoked !== undefined && revoked <= seg.from && other.node !== seg.node) {
        report.revokedOverlaps.push({ shard: seg.shard, totalShards: seg.totalShards, revoked: other.node, next: seg.node, ms })
      }
      if (expected(other, seg)) {
        report.liveReshardOverlaps += 1
      } else if (other.totalShards === seg.totalShards) {
        report.violations.push({ kind: 'overlap', detail: `shard ${seg.shard}: ${seg.node} started while ${other.node} ran it (${ms.toFixed(1)} ms together)` })
      } else {
        const pair = `${other.node} shard ${other.shard}/${other.totalShards} and ${seg.node} shard ${seg.shard}/${seg.totalShards}`
        report.violations.push({ kind: 'guild_overlap', detail: `guild ${guild}<<22: ${pair} together ${ms.toFixed(1)} ms` })
      }
    }
    active.push(seg)
  }
}

/**
 * Which overlaps a live reshard allows: a session of its next count started after the POST beside one of
 * its old count, when the old one stopped by the switch plus a lease (the agent's switch grace is a
 * check-in interval and a request; nodes learn of the switch within a check-in interval). Until the
 * switch the next set only identifies (the adapter delivers nothing of it), after it the old set runs out.
 */
function liveReshardAllowance(input: OverlapInput): (a: Segment, b: Segment) => boolean {
  const windows = input.liveReshards ?? []
  if (windows.length === 0) return () => false
  return (a, b) =>
    windows.some((w) => {
      const [next, old] = a.totalShards === w.to && b.totalShards === w.from ? [a, b] : b.totalShards === w.to && a.totalShards === w.from ? [b, a] : [null, null]
      if (next === null || old === null) return false
      const oldEndsBy = (w.switchedAt ?? input.endT) + input.leaseMs
      return next.from >= w.postedAt && old.to <= oldEndsBy
    })
}

/**
 * The guild-coverage check of a live reshard: the first moment within [from, to] at which some guild was
 * served by no running session (each judged by its own count), or null. Guilds are classes modulo the
 * lcm of the counts involved (every class is covered by exactly the sessions whose shard it maps to).
 */
export function coverageGap(records: readonly FleetRecord[], counts: readonly number[], from: number, to: number, endT: number): string | null {
  const lcm = counts.reduce((l, c) => (l * c) / gcd(l, c), 1)
  if (lcm > 1_048_576) return null // not judged: too many classes
  const covering = new Int32Array(lcm)
  const intervals = holdingIntervals(records, endT).filter((iv) => counts.includes(iv.totalShards))
  const edges: [number, number, Interval][] = []
  for (const iv of intervals) {
    edges.push([iv.start, 1, iv])
    edges.push([iv.stop, -1, iv])
  }
  // starts before stops at one instant: a session that takes over at the same moment leaves no gap
  edges.sort((x, y) => x[0] - y[0] || y[1] - x[1])
  for (const [t, delta, iv] of edges) {
    for (let g = iv.shard; g < lcm; g += iv.totalShards) {
      covering[g]! += delta
      if (delta < 0 && covering[g] === 0 && t >= from && t <= to) return `guild class ${g} (mod ${lcm}) had no session when ${iv.node} stopped shard ${iv.shard}/${iv.totalShards} at ${Math.round(t)} ms`
    }
  }
  return null
}

function wakeTimings(intervals: readonly Interval[], input: OverlapInput, report: OverlapReport): void {
  for (const f of input.freezes) {
    const held = intervals.filter((iv) => f.nodes.includes(iv.node) && iv.start < f.from && iv.stop > f.from)
    const wakeToStopMs = held.length === 0 ? null : Math.max(...held.map((iv) => iv.stop - f.to))
    report.pauses.push({ frozenMs: f.to - f.from, heldShards: held.length, wakeToStopMs })
  }
}

function revocationChecks(intervals: readonly Interval[], input: OverlapInput, report: OverlapReport): void {
  for (const { node, requestedAt, at } of input.revocations) {
    const mine = intervals.filter((iv) => iv.node === node)
    const deadline = at + CRL_PICKUP_MS + input.leaseMs
    for (const iv of mine) {
      if (iv.start > at + CRL_PICKUP_MS) report.violations.push({ kind: 'revoked_started', detail: `${node} started shard ${iv.shard} ${Math.round(iv.start - at)} ms after its revocation` })
      if (iv.stop > deadline) report.violations.push({ kind: 'revoked_kept_running', detail: `${node} still ran shard ${iv.shard} ${Math.round(iv.stop - at)} ms after its revocation` })
    }
    // Held when the CLI started: a plan change while the CLI ran (a second or two) would hide them.
    const held = mine.filter((iv) => iv.start <= requestedAt && iv.stop > requestedAt)
    report.revocations.push({ node, heldShards: held.length, lastStopMs: held.length === 0 ? null : Math.max(...held.map((iv) => iv.stop - requestedAt)) })
  }
}
