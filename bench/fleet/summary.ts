/** The end-of-run summary: one JSON-able object, and the table printed from it. */
import type { PauseFigures, RevocationFigures } from './check-overlaps.js'
import type { PartitionFigures, ReshardFigures } from './event-figures.js'
import type { GatewayFigures } from './gateway-run.js'
import type { RestartFigures } from './metrics.js'
import { GATEWAY_VIOLATION_KINDS, VIOLATION_KINDS, type Violation, type ViolationKind } from './violations.js'

/** Everything a run reports. */
/** A live reshard (POST /v1/reshard) as the summary shows it. */
export interface LiveReshardFigures {
  readonly from: number
  readonly to: number
  /** Seconds from POST /v1/reshard until the controller ran `to` shards, or null when it did not switch. */
  readonly switchAfterS: number | null
  /** Seconds from the POST until no session of the old count ran. */
  readonly oldSetGoneAfterS: number | null
  /** Identify grants of the next set (audited with "set": "next"). */
  readonly nextGrants: number
  /** IDENTIFYs of the next set's shard count the gateway emulator received (null without --gateway discordjs). */
  readonly nextIdentifies: number | null
  /** The guild-coverage check over the reshard: null when some session covered every guild throughout. */
  readonly coverageGap: string | null
  /** Guild overlaps of the two sets (Discord allows them for resharding; not violations). */
  readonly setOverlaps: number
}

export interface FleetSummary {
  readonly seed: number
  /** Two controller replicas on etcd (--ha). */
  readonly ha: boolean
  readonly nodes: number
  readonly shards: number
  /** total_shards at the end (after any reshard restarts). */
  readonly shardsAtEnd: number
  readonly maxConcurrency: number
  readonly leaseSeconds: number
  readonly workerProcesses: number
  readonly runSeconds: number
  /** Seconds from the end of the churn until the fleet converged, or null if it did not. */
  readonly convergedAfterS: number | null
  readonly churn: Record<string, number>
  readonly counts: Record<string, number>
  readonly moves: number
  readonly handoffGapMs: { readonly p50: number | null; readonly max: number | null }
  readonly restarts: readonly RestartFigures[]
  /** Per HA take-over (kill -9 of the leader): downtime until the other replica served, renewals, moves. */
  readonly takeovers: readonly (RestartFigures & { readonly killedReplica: number })[]
  readonly reshards: readonly ReshardFigures[]
  /** The live reshard after the churn (--live-reshard), or null. */
  readonly liveReshard: LiveReshardFigures | null
  readonly partitions: readonly PartitionFigures[]
  readonly pauses: readonly PauseFigures[]
  readonly revocations: readonly (RevocationFigures & { readonly droppedAfterMs: number | null })[]
  readonly revokedOverlaps: { readonly count: number; readonly maxMs: number | null }
  readonly grants: {
    readonly received: number
    readonly audited: number
    readonly minAuditedGapMs: number | null
    readonly minReceivedGapMs: number | null
    readonly peakDaily: number
    readonly dailyLimit: number
    readonly intervalMs: number
  }
  /** The gateway emulator's figures (--gateway discordjs), or null. */
  readonly gateway: GatewayFigures | null
  readonly violationsByKind: Record<ViolationKind, number>
  /** The first violations in full. */
  readonly violations: readonly Violation[]
  readonly notes: readonly string[]
}

const ms = (v: number | null | undefined): string => (v === null || v === undefined ? '-' : `${Math.round(v)} ms`)
const row = (label: string, value: string | number): string => `  ${label.padEnd(34)} ${value}`

/** The summary table, line by line. */
export function formatSummary(s: FleetSummary): string[] {
  const c = (name: string) => s.counts[name] ?? 0
  const total = Object.values(s.violationsByKind).reduce((a, b) => a + b, 0)
  const lines = [
    `fleet summary (seed ${s.seed}): ${s.nodes} nodes, ${s.shards} shards${s.shardsAtEnd === s.shards ? '' : ` (${s.shardsAtEnd} at the end)`}, max_concurrency ${s.maxConcurrency},${s.ha ? ' two HA replicas on etcd,' : ''} lease ${s.leaseSeconds} s, ${s.workerProcesses} agent processes, ${s.runSeconds.toFixed(1)} s`,
    row('churn done', Object.entries(s.churn).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'),
    row('records (starts / stops / plans)', `${c('records')} (${c('starts')} / ${c('stops')} / ${c('plans_accepted')})`),
    row('shard moves', `${s.moves} (handoff stop → start p50 ${ms(s.handoffGapMs.p50)}, max ${ms(s.handoffGapMs.max)})`),
    row('identify grants received / audited', `${s.grants.received} / ${s.grants.audited} (budget ${s.grants.dailyLimit}, peak 24 h ${s.grants.peakDaily})${c('stale_start_grants') > 0 ? `; ${c('stale_start_grants')} start grant${c('stale_start_grants') === 1 ? '' : 's'} too old for the IDENTIFY, claimed afresh` : ''}`),
    row('closest grants in a bucket', `${ms(s.grants.minAuditedGapMs)} audited, ${ms(s.grants.minReceivedGapMs)} as received (interval ${s.grants.intervalMs} ms)`),
    row('claims waiting', `bucket_busy ${c('claim:bucket_busy')}, handoff_pending ${c('claim:handoff_pending')}, daily_limit ${c('claim:daily_limit')}, not_owner ${c('claim:not_owner')}, failed ${c('claim:failed')}`),
    row('check-ins failed (429)', `${c('checkin:failed')} (${c('checkin:429')})`),
    row('fail-safe stops (lease_expiring)', c('stop:lease_expiring')),
    row('reshard stops / stop timeouts', `${c('stop:reshard')} / ${c('shard_stop_timed_out')} (stops aborted ${c('stops_aborted')})`),
    ...s.restarts.map((r, i) => row(`restart ${i + 1} (kill -9)`, `down ${ms(r.downMs)}, every node renewed after ${r.allRenewedMs === null ? `- (not: ${r.notRenewed.join(', ')})` : ms(r.allRenewedMs)}, shards moved ${r.moved}${rebased(r)}, renewals with another plan ${r.changedRenewals}, fail-safe fired on ${r.authorityLost} agents`)),
    ...s.takeovers.map((r, i) => row(`take-over ${i + 1} (kill -9 of replica ${r.killedReplica})`, `served again after ${ms(r.downMs)}, every node renewed after ${r.allRenewedMs === null ? `- (not: ${r.notRenewed.join(', ')})` : ms(r.allRenewedMs)}, shards moved ${r.moved}${rebased(r)}, renewals with another plan ${r.changedRenewals}, fail-safe fired on ${r.authorityLost} agents`)),
    ...s.reshards.map((r, i) => row(`reshard ${i + 1} (${r.signal === 'SIGKILL' ? 'kill -9' : 'SIGTERM'}, ${r.fromShards} → ${r.toShards})`, `down ${ms(r.downMs)}, plan at ${r.planTotalShards} shards, every node on it after ${ms(r.allOnNewPlanMs)}; ${r.oldSessions} old sessions, the last stopped ${ms(r.lastOldStopMs)} after the start, the first new one started after ${ms(r.firstNewStartMs)}`)),
    ...(s.liveReshard === null ? [] : [liveReshardLine(s.liveReshard)]),
    ...s.partitions.map((p, i) => row(`partition ${i + 1} (${p.node}, ${ms(p.cutMs)})`, `held ${p.heldShards} shards, the last stopped ${ms(p.lastStopMs)} after the cut (slowest stop ${ms(p.slowestStopMs)}, ${p.abortedStops} aborted); ${p.handedOn} started elsewhere during it, closest stop → start ${ms(p.minHandoffGapMs)}`)),
    ...s.pauses.map((p, i) => row(`pause ${i + 1} (SIGSTOP ${ms(p.frozenMs)})`, `held ${p.heldShards} shards; stopped ${ms(p.wakeToStopMs)} after the wake`)),
    ...s.revocations.map((r, i) => row(`revocation ${i + 1} (${r.node})`, `controller dropped it ${ms(r.droppedAfterMs)} after pxe-pki revoke; it held ${r.heldShards} shards as the CLI started, the last stopped ${ms(r.lastStopMs)} after that`)),
    row('overlaps after a revocation', `${s.revokedOverlaps.count} (must be 0: SPEC "Leases"; counted among the violations; longest ${ms(s.revokedOverlaps.maxMs)})`),
    ...(s.gateway === null ? [] : gatewayLines(s.gateway, c('claim:granted_resume'))),
    row('converged', s.convergedAfterS === null ? 'NO' : `${s.convergedAfterS.toFixed(1)} s after the churn`),
    `  violations: ${total}`,
    ...VIOLATION_KINDS.filter((k) => s.gateway !== null || !GATEWAY_VIOLATION_KINDS.has(k)).map((k) => `    ${k.padEnd(24)} ${s.violationsByKind[k]}`),
    ...s.violations.slice(0, 20).map((v) => `  ! ${v.kind}: ${v.detail}`),
    ...s.notes.map((n) => `  note: ${n}`),
  ]
  return lines
}

/** The gateway's rows: IDENTIFYs and RESUMEs per phase, breaches by kind, delivery. */
function gatewayLines(g: GatewayFigures, resumeGrants: number): string[] {
  const counts = (p: GatewayFigures['total']) => `IDENTIFY ${p.identifies} (sessions started ${p.sessionsStarted}), RESUME ${p.resumes} (refused ${p.refusedResumes})`
  const breaches = Object.entries(g.breaches).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'
  const d = g.delivery
  return [
    row('gateway (discord.js adapter)', `${g.sessions} sessions, ${g.eventsPerSecond} test events/s each; ${resumeGrants} handed-over sessions granted to their new owner`),
    ...g.phases.map((p) => row(`  ${p.phase}`, counts(p))),
    row('  total', counts(g.total)),
    row('  emulator breaches', `${breaches}${g.revokedOverlaps === 0 ? '' : ` (${g.revokedOverlaps} overlaps after a revocation)`}`),
    row('  test events', `${d.expected} produced, ${d.delivered} delivered; lost ${d.lost}, duplicated ${d.duplicated}, unknown ${d.unknown} (${d.undeliverable} after a session ended without a successor${d.undeliverable === 0 ? '' : `: ${Object.entries(d.undeliverableBy).map(([k, v]) => `${k} ${v}`).join(', ')}`})`),
  ]
}

/** The live reshard's line: time to the switch, the next set's grants, the guild-coverage check. */
function liveReshardLine(r: LiveReshardFigures): string {
  const secs = (x: number | null) => (x === null ? '-' : `${x.toFixed(1)} s`)
  const coverage = r.coverageGap === null ? 'every guild covered throughout' : `GAP: ${r.coverageGap}`
  return row(`live reshard (${r.from} → ${r.to})`, `switched ${secs(r.switchAfterS)} after POST /v1/reshard, old set gone after ${secs(r.oldSetGoneAfterS)}; ${r.nextGrants} next-set Identify grants${r.nextIdentifies === null ? '' : ` (${r.nextIdentifies} IDENTIFYs at the gateway)`}; ${coverage}; ${r.setOverlaps} overlaps of the two sets (allowed while resharding)`)
}

/** Said when a restart was judged against a generation made durable between the plan read and the kill. */
function rebased(r: RestartFigures): string {
  return r.rebasedTo === null ? '' : ` (against generation ${r.rebasedTo}, made durable between the read and the kill)`
}
