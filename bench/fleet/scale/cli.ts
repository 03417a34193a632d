/**
 * `npm run bench:fleet [-- options]`: the 10,000-node fleet benchmark (see ../README.md). It takes minutes
 * (issuing 10,000 bundles alone does, unless --pki reuses them), so it is not part of `npm run bench`.
 */
import { writeFile } from 'node:fs/promises'
import { longestRegularDelayMs } from '../../../src/agent/cadence.js'
import { handleInterrupts } from '../interrupt.js'
import { BENCH_HELP, BenchUsageError, parseBenchArgs } from './bench-options.js'
import type { DrainFigures } from './drain-phase.js'
import { failedAttempts, runFleetBench, type AnsweredMedians, type BenchFigures } from './fleet-bench.js'
import { formatProfile } from './profile-summary.js'
import { atCeiling, coldJoinBreakdown } from './ceiling-costs.js'
import { medianLines } from './medians.js'

const out = (line: string) => process.stdout.write(`${line}\n`)

function report(f: BenchFigures): void {
  const o = f.options
  const s = (v: number | null, digits = 1) => (v === null ? '-' : `${v.toFixed(digits)} s`)
  out(`fleet bench: ${o.nodes} nodes of capacity ${o.capacity}, ${o.shards} shards, max_concurrency ${o['max-concurrency']}, lease ${o.lease} s, planner ${o.planner}; ${o.workers} load-generator process(es) at nice ${o['generator-nice']}; load average ${f.loadAverage.start.toFixed(2)} at the start, ${f.loadAverage.end.toFixed(2)} at the end`)
  if (f.ha !== null) out(`  control plane: two replicas on etcd (${f.ha.etcd}), lease TTL ${f.ha.ttlSeconds} s; the figures are the leading replica's process`)
  const c = f.coldJoin
  out(`  (a) cold join      every node joined after ${s(c.allJoinedS)}; plan stable (generation ${c.generation}) and every node holding its range after ${s(c.stableS)}`)
  out(`                     controller CPU ${s(c.controllerCpuS)} (all threads), RSS ${c.rssMiB.toFixed(0)} MiB (peak ${c.peakRssMiB.toFixed(0)} MiB); handshakes ${c.counters.handshakes ?? 0}, failed attempts ${failedAttempts(c.counters)}, deferred by admission ${c.counters.deferred ?? 0}`)
  const joined = c.counters.handshakes ?? 0
  out(costLine(c.controllerCpuS, joined, f.ceiling === null ? null : atCeiling(f.ceiling, joined, 0), 'full'))
  if (c.replanS !== null) {
    const apart = c.controllerCpuS - c.replanS
    const atCost = f.ceiling === null ? null : atCeiling(f.ceiling, joined, 0)
    const ratio = atCost === null ? 'ceiling not measured' : `${(apart / Math.max(atCost, 1e-9)).toFixed(2)}× the ceiling's cost of those connections (goal ≤ 1.3×)`
    out(`                     re-plans took ${s(c.replanS, 2)} of the main thread (pxe_replan_duration_seconds); the rest, ${s(apart)}: ${ratio}`)
  }
  const parts = coldJoinBreakdown(f)
  if (parts !== null) {
    const ratio = parts.ratio === null ? 'ceiling not measured' : `${parts.ratio.toFixed(2)}× the ceiling's cost of those connections`
    out(`                     of that, ${parts.renewals} check-ins on connections already open (earlier nodes renewing, and every node taking the last generation), at the steady state's ${parts.steadyMsPerCheckin.toFixed(2)} ms each: ${s(parts.renewalsS)}; the joins themselves (handshake and first check-in, deferrals, bookkeeping): ${s(parts.joinsS)}, ${ratio}`)
  }
  if (parts?.atCeilingS != null && f.ceiling !== null) {
    out(`                     the whole phase at the ceiling's costs (its ${joined} connections full, its ${parts.renewals} renewals at ${f.ceiling.renewalMs.toFixed(2)} ms each, a check-in arriving alone as a fleet's do): ${s(parts.atCeilingS)}, so the ceiling itself would read ${parts.ceilingOwnRatio!.toFixed(2)}× on the measure above; the controller's phase less re-plans: ${parts.vsCeilingPhase!.toFixed(2)}× that`)
  }
  const takeover = f.restart.kind === 'takeover'
  const windows = [
    ['(c) steady state', f.steady, f.ha?.etcdCpuPerS.steady ?? null],
    [takeover ? '    after take-over' : '    after restart', f.steadyAfterRestart, f.ha?.etcdCpuPerS.afterTakeover ?? null],
  ] as const
  for (const [label, w, etcdCpu] of windows) {
    const etcd = etcdCpu === null ? '' : `; etcd ${etcdCpu.toFixed(3)} s per second (3 members)`
    out(`  ${label}   ${w.checkinsPerS.toFixed(0)} check-ins/s over ${w.seconds.toFixed(0)} s: controller CPU ${w.controllerCpuPerS.toFixed(3)} s per second (${(w.controllerCpuPerS * 100).toFixed(1)} % of a core), RSS ${w.rssMiB.toFixed(0)} MiB; load generator ${w.generatorCpuPerS.toFixed(3)} s per second; ${w.handshakes} handshakes${etcd}`)
  }
  const r = f.restart
  const verdict = r.allRenewedS !== null && r.allRenewedS <= o.lease ? 'MEETS' : 'MISSES'
  if (takeover) {
    out(`  (b) take-over      kill -9 of the leader → the other replica led ${s(r.listeningAfterS)} after; every node renewed ${s(r.allRenewedS)} after the kill (${verdict} the goal: within one ${o.lease} s lease); ${r.renewed}/${o.nodes} renewed`)
  } else {
    const how = o['cpu-prof-join'] === undefined ? 'kill -9' : 'SIGTERM (--cpu-prof-join: not a crash)'
    out(`  (b) restart        ${how} → listening ${s(r.listeningAfterS)}; every node renewed ${s(r.allRenewedS)} after the kill (${verdict} the goal: within one ${o.lease} s lease); ${r.renewed}/${o.nodes} renewed`)
  }
  out(`                     shards moved ${r.movedShards}; nodes given another plan ${r.changedPlans}; nodes whose agent fail-safe would have fired first ${r.failSafeLate}`)
  // A steady state renews every node within one check-in interval (the agent's longest regular delay)
  // and a second for its answer; a node whose last renewal was older at the kill was behind before the
  // storm began (a slow answer in the cold join's last seconds, a check-in still waiting).
  const behindS = Math.ceil(longestRegularDelayMs(o.lease * 1000) / 1000) + 1
  const behind = (ages: Readonly<Record<string, number>>) => Object.entries(ages).reduce((sum, [sec, n]) => sum + (Number(sec) >= behindS ? n : 0), 0)
  out(`                     the age of each node's last renewal at the kill, by second: ${byNumber(r.renewalAgeAtKillS)}; ${behind(r.renewalAgeAtKillS)} nodes older than ${behindS} s (a check-in interval and a second: behind before the kill), ${behind(r.lateRenewalAgeAtKillS)} of them late`)
  if (r.failSafeLate > 0) {
    out(`                     those by their fail-safe's second after the kill: ${byNumber(r.lateByFailSafeS)}; their attempts before the late answer: ${byName(r.lateAttempts)}`)
    const { late, onTime } = r.answered
    const lead = (m: AnsweredMedians) => (m.leadS === null ? '-' : `${m.leadS.toFixed(2)} s`)
    const took = (m: AnsweredMedians) => (m.tookS === null ? '-' : `${m.tookS.toFixed(2)} s`)
    out(`                     the answered attempt (medians): the late nodes began it ${lead(late)} before their fail-safe and it took ${took(late)}; the nodes on time ${lead(onTime)} before, taking ${took(onTime)}`)
    const split = (m: AnsweredMedians) => [m.tcpS, m.tlsS, m.replyS].map((v) => (v === null ? '-' : v.toFixed(2))).join(' / ')
    out(`                     of it, at the port that answered (medians, s): TCP connect / TLS handshake / request to answer: late ${split(late)}; on time ${split(onTime)}`)
    const lagOf = (m: AnsweredMedians) => (m.lagS === null ? '-' : `${m.lagS.toFixed(2)} s`)
    out(`                     the load generator's own lag: the check-in timer that began that attempt fired a median ${lagOf(late)} late (on time: ${lagOf(onTime)}); ${r.lateWithinLag} of the ${r.failSafeLate} late nodes were answered after their fail-safe by no more than their own timer's lag (an agent on a machine of its own sends on time)`)
    const h = r.controllerHandshakes
    if (h !== null) out(`                     the controller's view of its ${h.count} handshakes, from accept to established (pxe_tls_handshake_duration_seconds): median under ${h.p50} s, 90th percentile under ${h.p90} s`)
  }
  const lag = r.generatorLoopDelayMs === null ? '' : ` (event-loop delay p50 ${r.generatorLoopDelayMs.p50.toFixed(0)} ms, p99 ${r.generatorLoopDelayMs.p99.toFixed(0)} ms, max ${r.generatorLoopDelayMs.max.toFixed(0)} ms)`
  if (r.controllerLoop !== null) {
    const { busyS, runQueueS, wallS } = r.controllerLoop
    const from = takeover ? 'its first answer as leader' : 'listening'
    const pct = (v: number) => `${((100 * v) / wallS).toFixed(0)} %`
    out(`                     the controller's event loop (main thread), ${s(wallS)} from ${from} to the end: on a CPU ${s(busyS)} (${pct(busyS)}), ready but waiting for a core ${s(runQueueS)} (${pct(runQueueS)}), waiting for work the rest (nodes to come back, or their bytes: with thousands of handshakes in flight, the load generators)`)
  }
  out(`                     controller CPU ${s(r.controllerCpuS)} from ${takeover ? 'the kill' : 'listening'} to the last renewal (peak RSS ${r.peakRssMiB.toFixed(0)} MiB); load generator ${s(r.generatorCpuS)}${lag}; ${r.handshakes} handshakes, ${r.resumedHandshakes} of them resumed; failed attempts ${r.failedAttempts}, deferred by admission ${r.deferred}`)
  out(costLine(r.controllerCpuS, r.handshakes, f.ceiling === null ? null : atCeiling(f.ceiling, r.handshakes - r.resumedHandshakes, r.resumedHandshakes), 'as they came'))
  if (takeover) out(`  take-over: every node renewed ${s(r.allRenewedS)} after the kill; shards moved ${r.movedShards}; full handshakes ${r.handshakes - r.resumedHandshakes}, resumed ${r.resumedHandshakes}`)
  if (f.drain !== null) reportDrain(f.drain, o.planner)
  if (f.ha !== null && f.ha.drainRequests !== null) {
    const q = f.ha.drainRequests
    const p = f.ha.drainPhase!
    const slowest = f.drain === null || f.drain.requestMs.length === 0 ? null : Math.max(...f.drain.requestMs)
    const durable = slowest !== null && slowest <= 1000 ? 'MEETS' : 'MISSES'
    // The median and the 90th percentile beside the slowest: one request behind a compaction or a busy moment, or all of them slow.
    const sorted = [...(f.drain?.requestMs ?? [])].sort((a, b) => a - b)
    const at = (q: number) => (sorted.length === 0 ? '-' : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!.toFixed(0))
    out(`                     etcd: over the drain requests ${q.puts} puts, ${q.deletes} deletes in ${q.txns} transactions; leader main thread ${f.ha.drainMainThreadS?.toFixed(2) ?? '-'} s; each request answered once its plan was durable in etcd: slowest ${slowest?.toFixed(0) ?? '-'} ms (${durable} the goal: within 1 s), median ${at(0.5)} ms, 90th percentile ${at(0.9)} ms`)
    const d = f.drain
    if (d !== null && d.answerMs.length > 0) {
      const quantile = (xs: readonly number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!.toFixed(0)
      const worst = d.requestMs.indexOf(Math.max(...d.requestMs))
      out(`                     of each request: connecting (TCP, a full TLS handshake with the busy leader) slowest ${Math.max(...d.connectMs).toFixed(0)} ms, median ${quantile(d.connectMs, 0.5)} ms; the request on the open connection until its answer (the write in flight, the drain's own write) slowest ${Math.max(...d.answerMs).toFixed(0)} ms, median ${quantile(d.answerMs, 0.5)} ms, 90th percentile ${quantile(d.answerMs, 0.9)} ms; the slowest request: ${d.connectMs[worst]?.toFixed(0) ?? '-'} + ${d.answerMs[worst]?.toFixed(0) ?? '-'} ms (the rest of a request's time: the replica that does not lead, asked first, and retries)`)
    }
    out(`                     etcd over the whole phase (the nodes' reports, deposits and claims too): ${p.puts} puts, ${p.deletes} deletes in ${p.txns} transactions`)
  }
  if (f.joinProfile !== null) {
    out(`  profile of the first controller ${f.joinProfile.file}`)
    for (const line of formatProfile('cold join (start to plan stable)', f.joinProfile.join)) out(line)
    for (const line of formatProfile('steady state after the cold join', f.joinProfile.steady)) out(line)
  }
  if (f.profile !== null) {
    out(`  profile ${f.profile.file}`)
    const stopped = f.options['cpu-prof-join'] === undefined ? 'kill -9' : 'SIGTERM'
    for (const line of formatProfile(`restart (${stopped} to the last renewal)`, f.profile.restart)) out(line)
    for (const line of formatProfile('steady state after the restart', f.profile.steady)) out(line)
    if (f.profile.drain !== null) for (const line of formatProfile('drain (first drain request to every moved shard running)', f.profile.drain)) out(line)
  }
}

/** Controller CPU per connection in a phase, and what those connections would have cost at the ceiling. */
function costLine(cpuS: number, connections: number, ceilingS: number | null, kind: string): string {
  if (connections === 0) return `                     controller CPU per connection -; no connection was made in this phase`
  const per = `${((cpuS * 1000) / connections).toFixed(2)} ms`
  const at = ceilingS === null ? 'ceiling not measured' : `at the ceiling's cost (measured in this run) those ${connections} connections (${kind}) would take ${ceilingS.toFixed(1)} s: ${(cpuS / Math.max(ceilingS, 1e-9)).toFixed(2)}× (everything the phase did, re-plans included, per connection)`
  return `                     controller CPU per connection ${per}; ${at}`
}

function reportDrain(d: DrainFigures, planner: string): void {
  const verdict = d.grants === 0 ? 'MEETS' : 'MISSES'
  const running = d.allRunningS === null ? `NOT within 180 s of the last drain (${d.missingAtEnd} shards not running then)` : `${d.allRunningS.toFixed(1)} s after the first drain`
  out(`  (d) drain          ${d.drained} nodes drained one request after another in ${d.requestsS.toFixed(1)} s (planner ${planner}), generation ${d.fromGeneration} -> ${d.toGeneration}; ${d.changedOwner} shards changed owner`)
  out(`                     before the drains ${d.before.full} nodes held a full range (range = capacity), ranges of ${d.before.minCount} to ${d.before.maxCount} shards`)
  out(`                     Identify grants ${d.grants} (${verdict} the goal: 0), resumes ${d.resumes}; every moved shard running again ${running}`)
  out(`                     ${d.shardsStopped} shards stopped, ${d.sessionsDeposited} sessions deposited in ${d.depositCheckins} check-ins (${d.depositsRefused} refused), ${d.sessionsDeposited - d.resumes} never handed out (still held at the end, or dropped at the TTL); ${d.wrongSessions} resumes with another shard's session`)
  out(`                     claims answered handoff_pending ${d.handoffPending}, bucket_busy ${d.bucketBusy}, not_owner ${d.notOwner}, failed ${d.claimFailures}; controller CPU ${d.controllerCpuS.toFixed(1)} s, load generator ${d.generatorCpuS.toFixed(1)} s`)
}


async function main(): Promise<number> {
  let opts
  try {
    opts = parseBenchArgs(process.argv.slice(2))
  } catch (err) {
    if (!(err instanceof BenchUsageError)) throw err
    process.stderr.write(`bench:fleet: ${err.message} (see --help)\n`)
    return 2
  }
  if (opts === null) {
    out(BENCH_HELP)
    return 0
  }
  const runs = await runFleetBench(opts, out, (line) => process.stderr.write(`${line}\n`))
  runs.forEach((figures, i) => {
    if (runs.length > 1) out(`run ${i + 1} of ${runs.length}:`)
    report(figures)
  })
  if (runs.length > 1) for (const line of medianLines(runs)) out(line)
  if (opts.json !== undefined) await writeFile(opts.json, `${JSON.stringify(runs.length === 1 ? runs[0] : runs, null, 2)}\n`)
  return 0
}

handleInterrupts('bench:fleet')
main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench:fleet: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exit(1)
  },
)

/** "9 s: 12, 10 s: 40" in numeric order. */
function byNumber(counts: Readonly<Record<string, number>>): string {
  return Object.entries(counts).sort(([a], [b]) => Number(a) - Number(b)).map(([k, v]) => `${k} s: ${v}`).join(', ') || '-'
}

/** "deferred 30, error_ECONNREFUSED 12", the largest first. */
function byName(counts: Readonly<Record<string, number>>): string {
  return Object.entries(counts).sort(([, a], [, b]) => b - a).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'
}
