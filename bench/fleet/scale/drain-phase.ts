/**
 * Phase (d) of the fleet benchmark: planned moves with session handoff (SPEC "Session handoff"). The light
 * nodes track moves from the steady state (every shard of a range runs); an operator drains `--drain`
 * nodes spread over the fleet, one request after another (`POST /v1/nodes/:id/drain`). Nodes that lose
 * running shards stop them and deposit their sessions in the check-in that reports the new generation,
 * sent at once; nodes that gain shards claim them. The phase ends when every node holds the last
 * drain's generation, every shard of every range runs again and no session waits to be deposited.
 */
import { OperatorRefused, type OperatorClient, type OperatorPlan } from '../operator-client.js'
import { isDeferredConnectionError } from '../../../src/net/busy-notice.js'
import { sharedNow } from '../shared-clock.js'
import type { LoadPool } from './load-pool.js'
import type { LoadStatus } from './load-protocol.js'

/** The figures of phase (d). */
export interface DrainFigures {
  readonly drained: number
  /** From the first drain request to the last one's answer. */
  readonly requestsS: number
  readonly fromGeneration: number
  readonly toGeneration: number
  /** Shards whose owner differs between the plans before the first drain and after the last. */
  readonly changedOwner: number
  /** The plan before the drains: nodes whose range fills their capacity, and the smallest and largest range. */
  readonly before: { readonly full: number; readonly minCount: number; readonly maxCount: number }
  /** Claims granted during the phase: with a deposited session (RESUME) or an ordinary Identify grant. */
  readonly resumes: number
  readonly grants: number
  readonly handoffPending: number
  readonly bucketBusy: number
  readonly notOwner: number
  /** Claims that failed otherwise (HTTP errors, connection errors). */
  readonly claimFailures: number
  readonly shardsStopped: number
  readonly sessionsDeposited: number
  readonly depositCheckins: number
  readonly depositsRefused: number
  /** Resumes that handed out another shard's session (must be 0). */
  readonly wrongSessions: number
  /** From the first drain request until every moved shard ran again (null: not within the timeout). */
  readonly allRunningS: number | null
  /** Shards not running when the phase ended (0 unless it timed out, 180 s after the last drain's answer). */
  readonly missingAtEnd: number
  readonly controllerCpuS: number
  readonly generatorCpuS: number
  /** Each drain request's time from sending to its answer (sent once the new plan was durable), ms. */
  readonly requestMs: readonly number[]
  /**
   * The same requests' last attempt split: connecting (TCP and a full TLS handshake with the leader, whose
   * loop is busy with the fleet) and answering (the request on the established connection: waiting for
   * the write in flight, the drain's own write to etcd, the answer), ms. Retries are in requestMs only.
   */
  readonly connectMs: readonly number[]
  readonly answerMs: readonly number[]
}

/** What the phase works with. */
export interface DrainPhaseDeps {
  readonly names: readonly string[]
  readonly drain: number
  readonly pool: LoadPool
  readonly operator: OperatorClient
  /** The controller's CPU seconds so far (every thread). */
  readonly controllerCpu: () => number
  readonly log: (line: string) => void
  readonly progress: (line: string) => void
  /** Called just before the first drain request and just after the last one's answer (e.g. etcd's counters). */
  readonly aroundRequests?: { readonly before: () => Promise<void>; readonly after: () => Promise<void> }
}

/** How long after the last drain's answer the phase waits for every moved shard to run. */
const TIMEOUT_MS = 180_000
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** `count` nodes spread evenly over `names` (the middle of each of `count` equal slices). */
export function drainedNodes(names: readonly string[], count: number): string[] {
  return Array.from({ length: count }, (_, i) => names[Math.floor(((i + 0.5) * names.length) / count)]!)
}

/** How full the plan's ranges are: a stable plan after a cold join may hold many full nodes, and a leaver's shards then travel past them. */
export function rangeFill(plan: OperatorPlan): DrainFigures['before'] {
  const counts = plan.nodes.filter((n) => !n.draining).map((n) => n.range_count)
  const full = plan.nodes.filter((n) => !n.draining && n.range_count === n.capacity).length
  return { full, minCount: counts.length === 0 ? 0 : Math.min(...counts), maxCount: counts.length === 0 ? 0 : Math.max(...counts) }
}

/** How many shards changed owner between two plans. */
export function changedOwners(before: OperatorPlan, after: OperatorPlan): number {
  const owners = (plan: OperatorPlan) => {
    const owner: (string | null)[] = new Array<string | null>(plan.total_shards).fill(null)
    for (const n of plan.nodes) for (let s = n.range_start; s < n.range_start + n.range_count; s++) owner[s] = n.node_id
    return owner
  }
  const a = owners(before)
  const b = owners(after)
  let changed = 0
  for (let s = 0; s < Math.max(a.length, b.length); s++) if (a[s] !== b[s]) changed += 1
  return changed
}

const done = (s: LoadStatus, generation: number) =>
  s.minGeneration === generation && s.maxGeneration === generation && s.movesMissing === 0 && s.movesDeposits === 0

/** How long one drain keeps asking while no replica leads (an election takes about one lease TTL). */
const NO_LEADER_RETRY_MS = 30_000

/**
 * One drain, retried as an operator's tool would: a 429 (the operator's rate limit, 20/s by default)
 * is waited out, and so is a 503 from every replica (none leads: an election is under way, or the
 * leader lost its lease during the request) and a deferred connection (a storm is being admitted).
 * A drain flag is idempotent, so asking again is safe.
 */
async function drainOne(operator: OperatorClient, node: string, log: (line: string) => void): Promise<number> {
  const since = sharedNow()
  for (;;) {
    try {
      return await operator.drain(node, true)
    } catch (err) {
      if (err instanceof OperatorRefused && err.status === 429) {
        await sleep(Math.max(err.retryAfterMs ?? 1000, 10))
        continue
      }
      const noLeader = err instanceof OperatorRefused && err.status === 503
      if (!noLeader && !isDeferredConnectionError(err)) throw err // the operator's client does not read busy notices
      if (sharedNow() - since > NO_LEADER_RETRY_MS) throw err
      log(`  (d) drain ${node}: ${noLeader ? (err as Error).message : 'the connection was deferred (busy notice)'}; asking again`)
      await sleep(noLeader ? 250 : 1000)
    }
  }
}

/** Runs phase (d); see the module comment. */
export async function drainPhase(deps: DrainPhaseDeps): Promise<DrainFigures> {
  const { pool, operator } = deps
  await pool.track(true)
  const before = await operator.plan()
  const s0 = await pool.status()
  const cpu0 = deps.controllerCpu()
  await deps.aroundRequests?.before()
  const t0 = sharedNow()
  let generation = before.generation
  const requestMs: number[] = []
  const connectMs: number[] = []
  const answerMs: number[] = []
  for (const node of drainedNodes(deps.names, deps.drain)) {
    const sent = sharedNow()
    generation = await drainOne(operator, node, deps.log)
    requestMs.push(sharedNow() - sent)
    if (operator.lastSplit !== null) {
      connectMs.push(operator.lastSplit.connectMs)
      answerMs.push(operator.lastSplit.answerMs)
    }
  }
  const lastDrainAt = sharedNow()
  await deps.aroundRequests?.after()
  const requestsS = (lastDrainAt - t0) / 1000
  deps.log(`  (d) drain: ${deps.drain} nodes drained in ${requestsS.toFixed(1)} s, generation ${before.generation} -> ${generation}`)
  let s = await pool.status()
  let lastProgress = 0
  while (!done(s, generation) && sharedNow() - lastDrainAt < TIMEOUT_MS) {
    if (sharedNow() - lastProgress >= 1000) {
      lastProgress = sharedNow()
      const c = (k: string) => (s.counters[k] ?? 0) - (s0.counters[k] ?? 0)
      deps.progress(`drain ${((lastProgress - t0) / 1000).toFixed(0)}s: ${s.movesMissing} shards not running, ${s.movesDeposits} sessions to deposit, generation ${s.minGeneration ?? '-'}..${s.maxGeneration ?? '-'}; ${c('claim_resume')} resumed, ${c('claim_identify')} Identify grants`)
    }
    await sleep(250)
    s = await pool.status()
  }
  const finished = done(s, generation)
  const end = finished ? Math.max(s.lastClaimAt ?? t0, s.lastReachedMaxAt ?? t0) : null
  const cpu1 = deps.controllerCpu()
  const after = await operator.plan()
  await pool.track(false)
  const diff = (k: string) => (s.counters[k] ?? 0) - (s0.counters[k] ?? 0)
  const claimFailures = Object.keys(s.counters)
    .filter((k) => k.startsWith('claim_status_') || k.startsWith('claim_error_'))
    .reduce((sum, k) => sum + diff(k), 0)
  return {
    drained: deps.drain,
    requestsS,
    fromGeneration: before.generation,
    toGeneration: generation,
    changedOwner: changedOwners(before, after),
    before: rangeFill(before),
    resumes: diff('claim_resume'),
    grants: diff('claim_identify'),
    handoffPending: diff('claim_handoff_pending'),
    bucketBusy: diff('claim_bucket_busy') + diff('claim_daily_limit'),
    notOwner: diff('claim_not_owner'),
    claimFailures,
    shardsStopped: diff('shards_stopped'),
    sessionsDeposited: diff('sessions_deposited'),
    depositCheckins: diff('deposit_checkins'),
    depositsRefused: diff('deposit_refused'),
    wrongSessions: diff('resume_wrong_shard'),
    allRunningS: end === null ? null : (end - t0) / 1000,
    missingAtEnd: s.movesMissing,
    controllerCpuS: cpu1 - cpu0,
    generatorCpuS: s.cpuSeconds - s0.cpuSeconds,
    requestMs,
    connectMs,
    answerMs,
  }
}
