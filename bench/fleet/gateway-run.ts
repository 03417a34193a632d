/**
 * The gateway side of a run with --gateway discordjs: the gateway emulator (test/support/gateway) in the
 * orchestrator, the test events every agent's discord.js client delivered, IDENTIFYs and RESUMEs per
 * phase, and at the end the emulator's own findings as figures and violations.
 */
import { writeFile } from 'node:fs/promises'
import { startGatewayEmulator, type GatewayEmulator } from '../../test/support/gateway/gateway-emulator.js'
import type { EventRef } from '../../test/support/gateway/emulated-session.js'
import type { Breach } from '../../test/support/gateway/emulator-records.js'
import type { LiveReshardWindow, Revocation } from './check-overlaps.js'
import type { FleetOptions } from './options.js'
import type { Delivery, GatewayTarget, SessionOwner } from './protocol.js'
import { sharedNow } from './shared-clock.js'
import type { Violation } from './violations.js'

/** What the emulator counted during one phase of the run (joining, churn, settling). */
export interface GatewayPhaseFigures {
  readonly phase: string
  /** IDENTIFY payloads received (sessionsStarted: those that started a session). */
  readonly identifies: number
  readonly sessionsStarted: number
  readonly resumes: number
  readonly refusedResumes: number
}

/** The gateway's part of the summary. */
export interface GatewayFigures {
  readonly eventsPerSecond: number
  readonly phases: readonly GatewayPhaseFigures[]
  readonly total: GatewayPhaseFigures
  /** Every breach the emulator recorded, by kind (bucket, session_start_limit, overlap, guild_overlap, heartbeat_miss, ...). */
  readonly breaches: Record<string, number>
  /** Overlaps (of the above) in which a revoked node still ran the earlier session: allowed by SPEC "Handoff safety", not counted. */
  readonly revokedOverlaps: number
  readonly sessions: number
  readonly delivery: {
    /** Test events the sessions produced, and entries received that matched one. */
    readonly expected: number
    readonly delivered: number
    /** Events a client should have received and none did (see judgeLost). */
    readonly lost: number
    /** Events produced after the last one delivered of a session that ended without a successor: nobody could receive them. */
    readonly undeliverable: number
    /** The same by how the session ended (`client closed 1000`, `not resumed within 60000 ms`, ..., or `resumable` when still waiting). */
    readonly undeliverableBy: Record<string, number>
    readonly duplicated: number
    readonly unknown: number
  }
}

/** How long the run waits after pausing the emulator's events for the last ones to reach the orchestrator (workers flush every 100 ms). */
const DRAIN_MS = 1500

type Snapshot = Omit<GatewayPhaseFigures, 'phase'>

/** The emulator of one run and what its agents delivered. */
export class GatewayRun {
  private readonly deliveries: Delivery[] = []
  private readonly owners = new Map<string, Set<string>>()
  private readonly phases: GatewayPhaseFigures[] = []
  private phase = 'joining'
  private mark: Snapshot

  private constructor(
    readonly emulator: GatewayEmulator,
    private readonly eventsPerSecond: number,
    /** The emulator's time 0 on the shared timeline (its records' `at` count from it; within a few ms). */
    readonly t0: number,
  ) {
    this.mark = this.snapshot()
  }

  /**
   * Starts the emulator for a run: Discord's shard count, buckets and 5 s window; the session start
   * budget is the controller's daily one (a breach then means the controller let too many through); a
   * resume window of at least 60 s, so that a handed-over session waits for its new owner.
   */
  static async start(opts: FleetOptions): Promise<GatewayRun> {
    const t0 = sharedNow()
    const emulator = await startGatewayEmulator({
      shardCount: opts.shards,
      maxConcurrency: opts.maxConcurrency,
      sessionStartLimit: { total: opts.dailyLimit },
      eventsPerSecond: opts.gatewayEventsPerSecond,
      resumeWindowMs: Math.max(60_000, 4 * opts.leaseS * 1000),
    })
    return new GatewayRun(emulator, opts.gatewayEventsPerSecond, t0)
  }

  /** What the workers need to connect. */
  get target(): GatewayTarget {
    return { url: this.emulator.url, apiUrl: this.emulator.apiUrl, token: this.emulator.token }
  }

  /** Adds the test events a worker's agents delivered. */
  addDeliveries(deliveries: readonly Delivery[]): void {
    for (const d of deliveries) this.deliveries.push(d)
  }

  /** Notes which node ran which session. */
  addOwners(owners: readonly SessionOwner[]): void {
    for (const [sessionId, node] of owners) {
      const set = this.owners.get(sessionId) ?? new Set<string>()
      set.add(node)
      this.owners.set(sessionId, set)
    }
  }

  /** Ends the current phase (its counts are taken now) and begins `next`. */
  enter(next: string): void {
    const now = this.snapshot()
    this.phases.push({ phase: this.phase, ...difference(now, this.mark) })
    this.phase = next
    this.mark = now
  }

  /**
   * The end of the run, before the agents stop: no more events, a wait for the last deliveries, then
   * the figures and the violations (bucket, overlap and session-start-limit breaches, lost and
   * duplicated events).
   */
  async finish(revocations: readonly Revocation[], dumpPath: string | null = null, liveReshards: readonly LiveReshardWindow[] = []): Promise<{ figures: GatewayFigures; violations: Violation[] }> {
    const e = this.emulator
    e.pauseEvents()
    await new Promise((r) => setTimeout(r, DRAIN_MS))
    this.enter('stopping')
    const breaches: Record<string, number> = {}
    for (const b of e.breaches) breaches[b.kind] = (breaches[b.kind] ?? 0) + 1
    const report = e.checkDelivery(this.deliveries.map(([sessionId, n]) => ({ sessionId, n })))
    const { counted: countedAll, revoked } = splitOverlaps(e.breaches, revocations, this.owners, this.t0)
    // A live reshard's two sets overlap by design (Discord allows it for resharding) until the old set ran out.
    const windowOf = (b: Breach) => b.kind === 'guild_overlap' && liveReshards.some((w) => {
      const counts = [b.a.numShards, b.b.numShards].sort((x, y) => x - y)
      const at = this.t0 + b.at
      return counts[0] === Math.min(w.from, w.to) && counts[1] === Math.max(w.from, w.to) && at >= w.postedAt
    })
    const counted = countedAll.filter((b) => !windowOf(b))
    // A next-set session's events before its first delivery came before its node learned of the switch:
    // the current set delivered those guilds' events (the adapter holds the next set back by design).
    const firstDelivered = new Map<string, number>()
    for (const [sessionId, n] of this.deliveries) firstDelivered.set(sessionId, Math.min(n, firstDelivered.get(sessionId) ?? Infinity))
    const heldBack = (ev: EventRef) => liveReshards.some((w) => ev.numShards === w.to) && ev.n < (firstDelivered.get(ev.sessionId) ?? Infinity)
    const lost = judgeLost(report.lost.filter((ev) => !heldBack(ev)), new Set(e.sessions({ state: 'live' }).map((s) => s.id)), this.deliveries)
    const lostSet = new Set(lost)
    const undeliverableBy: Record<string, number> = {}
    for (const ev of report.lost) {
      if (lostSet.has(ev)) continue
      const session = e.session(ev.sessionId)
      const why = session?.endReason ?? (session?.state === 'disconnected' ? 'resumable' : String(session?.state))
      undeliverableBy[why] = (undeliverableBy[why] ?? 0) + 1
    }
    const figures: GatewayFigures = {
      eventsPerSecond: this.eventsPerSecond,
      phases: this.phases,
      total: { phase: 'total', ...difference(this.snapshot(), { identifies: 0, sessionsStarted: 0, resumes: 0, refusedResumes: 0 }) },
      breaches,
      revokedOverlaps: revoked,
      sessions: e.sessions().length,
      delivery: {
        expected: report.expected,
        delivered: report.delivered,
        lost: lost.length,
        undeliverable: report.lost.length - lost.length,
        undeliverableBy,
        duplicated: report.duplicated.length,
        unknown: report.unknown.length,
      },
    }
    if (dumpPath !== null) await this.dump(dumpPath)
    return { figures, violations: gatewayViolations(counted, lost, report.duplicated) }
  }

  /** What the emulator saw (for --keep): every session without its dispatches, every IDENTIFY, RESUME and breach. */
  private async dump(path: string): Promise<void> {
    const e = this.emulator
    const last = new Map<string, number>()
    for (const [id, n] of this.deliveries) last.set(id, Math.max(n, last.get(id) ?? 0))
    const sessions = e.sessions().map(({ dispatches: _d, events, ...s }) => ({ ...s, events: events.length, lastDelivered: last.get(s.id) ?? 0, nodes: [...(this.owners.get(s.id) ?? [])] }))
    await writeFile(path, `${JSON.stringify({ sessions, identifies: e.identifies, resumes: e.resumes, breaches: e.breaches }, null, 1)}\n`)
  }

  /** IDENTIFY payloads received so far for sessions of `numShards` shards (a live reshard's next set). */
  identifiesOf(numShards: number): number {
    return this.emulator.identifies.filter((r) => r.numShards === numShards).length
  }

  stop(): Promise<void> {
    return this.emulator.stop()
  }

  private snapshot(): Snapshot {
    const s = this.emulator.stats
    return { identifies: s.identifies.total, sessionsStarted: s.sessionsStarted.total, resumes: s.resumes.total, refusedResumes: s.refusedResumes.total }
  }
}

function difference(a: Snapshot, b: Snapshot): Snapshot {
  return { identifies: a.identifies - b.identifies, sessionsStarted: a.sessionsStarted - b.sessionsStarted, resumes: a.resumes - b.resumes, refusedResumes: a.refusedResumes - b.refusedResumes }
}

/**
 * Which undelivered events count as lost. A session still live at the end (after the events paused
 * and the drain wait) must have delivered every event: a live owner, the original or a successor
 * that RESUMEd, should have received all of them, replays included. A session that is over — ended by
 * a 1000 close after a non-plan stop (a fail-safe, a leave, a reshard), expired or invalidated (a
 * frozen node's, a refused resume's), or left resumable with nobody resuming it — legitimately misses
 * what it produced after the last event any node received: its owner stopped and no successor took it
 * on. checkDelivery cannot tell these apart, so below that last delivered event every gap is still a
 * loss (a replay that skipped events, an adapter that dropped one), above it nothing is. What this
 * cannot see: a successor that RESUMEd and then delivered nothing before the session ended.
 */
export function judgeLost(undelivered: readonly EventRef[], live: ReadonlySet<string>, deliveries: readonly Delivery[]): EventRef[] {
  const lastDelivered = new Map<string, number>()
  for (const [sessionId, n] of deliveries) lastDelivered.set(sessionId, Math.max(n, lastDelivered.get(sessionId) ?? 0))
  return undelivered.filter((ev) => live.has(ev.sessionId) || ev.n < (lastDelivered.get(ev.sessionId) ?? 0))
}

/**
 * The breaches that count, and how many overlaps a revocation allows: as the simulator's own check
 * (check-overlaps.ts) has it, an overlap in which one session was run by a node revoked before the
 * overlap and the other by another node. The revoked node must still stop soon (revoked_kept_running).
 * `owners`: the nodes that ran each session; `t0`: the emulator's time 0 on the shared timeline.
 */
export function splitOverlaps(breaches: readonly Breach[], revocations: readonly Revocation[], owners: ReadonlyMap<string, ReadonlySet<string>>, t0: number): { counted: Breach[]; revoked: number } {
  const revokedAt = new Map(revocations.map((r) => [r.node, r.requestedAt]))
  const nodesOf = (id: string) => [...(owners.get(id) ?? [])]
  const allowed = (b: Breach) => {
    if (b.kind !== 'overlap' && b.kind !== 'guild_overlap') return false
    const [x, y] = b.kind === 'overlap' ? b.sessionIds : [b.a.sessionId, b.b.sessionId]
    const at = t0 + b.at
    const revokedIn = (id: string, other: string) => nodesOf(id).some((n) => (revokedAt.get(n) ?? Infinity) <= at && nodesOf(other).some((m) => m !== n))
    return revokedIn(x, y) || revokedIn(y, x)
  }
  const counted = breaches.filter((b) => !allowed(b))
  return { counted, revoked: breaches.length - counted.length }
}

/** The emulator's findings that fail the run. Heartbeat misses (a paused process) and protocol closes are reported, not counted. */
function gatewayViolations(breaches: readonly Breach[], lost: readonly EventRef[], duplicated: readonly (EventRef & { times: number })[]): Violation[] {
  const out: Violation[] = []
  for (const b of breaches) {
    if (b.kind === 'bucket') out.push({ kind: 'gateway_bucket', detail: b.detail })
    else if (b.kind === 'overlap' || b.kind === 'guild_overlap') out.push({ kind: 'gateway_overlap', detail: `${b.kind}: ${b.detail}` })
    else if (b.kind === 'session_start_limit') out.push({ kind: 'gateway_session_limit', detail: b.detail })
  }
  // One violation per session (an adapter that drops a replay drops many events of one session).
  for (const [id, events] of bySession(lost)) out.push({ kind: 'events_lost', detail: `${events.length} test events of session ${id} (shard ${events[0]!.shardId}/${events[0]!.numShards}) never delivered, the first n ${events[0]!.n}` })
  for (const [id, events] of bySession(duplicated)) out.push({ kind: 'events_duplicated', detail: `${events.length} test events of session ${id} (shard ${events[0]!.shardId}/${events[0]!.numShards}) delivered more than once, the first n ${events[0]!.n} ${events[0]!.times} times` })
  return out
}

function bySession<T extends EventRef>(events: readonly T[]): Map<string, T[]> {
  const map = new Map<string, T[]>()
  for (const ev of events) map.set(ev.sessionId, [...(map.get(ev.sessionId) ?? []), ev])
  return map
}
