/**
 * The node agent's own metrics (docs/monitoring.md "Node agent metrics"), on a prom-client registry of each agent's
 * own, never the global one: a host that runs several agents, or has metrics of its own, is not polluted.
 * Counters follow the events the agent already emits (one call per event, no I/O); gauges of the agent's
 * state are read from its status when scraped. Label values come from fixed sets, never a node, shard or
 * session ID. The default process metrics are the host's choice (pxe-node adds them); never added here.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { AgentEvent, RefusalReason } from './agent-events.js'
import type { ShardHealth } from './agent-options.js'
import type { AgentState, AgentStatus } from './agent-status.js'
import type { ClaimOutcome } from './claim-scheduler.js'
import { PLAN_REFUSAL_REASONS } from './plan-verifier.js'
import type { SessionDropReason } from './session-deposits.js'

/** What the scrape-time gauges read; both must be cheap and change nothing. */
export interface AgentMetricSources {
  status(): AgentStatus
  /** The shard counts as the check-in reports them (the host's `health` option, or the agent's own view). */
  health(): ShardHealth
  /** When the certificate in use expires (wall ms); absent: the gauge reads 0. */
  certificateExpiry?(): number
}

const REFUSAL_REASONS: readonly RefusalReason[] = [...PLAN_REFUSAL_REASONS, 'plain_mismatch']
const CLAIM_RESULTS = ['granted', 'resumed', 'bucket_busy', 'handoff_pending', 'daily_limit', 'not_owner', 'rate_limited', 'failed'] as const
const RESUME_RESULTS = ['resumed', 'refused', 'failed'] as const
const SESSION_RESULTS: readonly ('deposited' | 'refused' | SessionDropReason)[] = ['deposited', 'refused', 'invalid', 'not_a_plan_move', 'over_limit', 'given_back', 'expired']
const CHECKIN_RESULTS = ['accepted', 'refused', 'failed'] as const
const AGENT_STATES: readonly AgentState[] = ['idle', 'joining', 'active', 'no_authority', 'halted']
const HEALTH_STATES = ['ready', 'starting', 'backoff', 'fatal'] as const
// From an immediate grant to a daily limit that resets hours later.
const WAIT_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600, 14_400, 86_400]

type ClaimResult = (typeof CLAIM_RESULTS)[number]

/** A claim outcome as the `result` label (the controller's pxe_identify_claims_total uses the same words). */
function claimResult(outcome: ClaimOutcome): ClaimResult {
  switch (outcome.kind) {
    case 'granted':
      return outcome.mode === 'resume' ? 'resumed' : 'granted'
    case 'wait':
      return outcome.reason
    default:
      return outcome.kind
  }
}

const seconds = (wallMs: number | null) => (wallMs === null ? 0 : wallMs / 1000)

/** The metrics of one agent; `observe` every event it emits, scrape `registry`. */
export class AgentMetrics {
  /** This agent's metrics only: `await registry.metrics()` is the Prometheus text, `registry.contentType` its type. */
  readonly registry = new Registry()
  private readonly checkins: Counter<'result'>
  private readonly refused: Counter<'reason'>
  private readonly claims: Counter<'result'>
  private readonly waits: Histogram<'mode'>
  private readonly resumes: Counter<'result'>
  private readonly sessions: Counter<'result'>
  private readonly renewalFailures: Counter
  /** Shards whose claim was answered with a session to resume, until their start ends one way or the other. */
  private readonly resuming = new Set<number>()

  constructor(sources: AgentMetricSources) {
    const registers = [this.registry]
    stateGauges(sources, registers)
    this.checkins = counter('pxe_node_checkins_total', 'Check-ins by result: accepted (plan accepted), refused (plan refused), failed (no usable answer).', 'result', CHECKIN_RESULTS, registers)
    this.refused = counter('pxe_node_plans_refused_total', 'Plans refused, by the reason the verifier gave.', 'reason', REFUSAL_REASONS, registers)
    this.claims = counter('pxe_node_identify_claims_total', 'Identify claims answered, by result.', 'result', CLAIM_RESULTS, registers)
    this.waits = new Histogram({
      name: 'pxe_node_identify_wait_seconds',
      help: 'How long a shard waited for its grant, from when it was first wanted; mode: identify or resume.',
      labelNames: ['mode'],
      buckets: WAIT_BUCKETS,
      registers,
    })
    for (const mode of ['identify', 'resume']) this.waits.zero({ mode })
    this.resumes = counter('pxe_node_resumes_total', 'Starts with a handed-over session: resumed, refused (the gateway refused the RESUME), failed (the start failed otherwise).', 'result', RESUME_RESULTS, registers)
    this.renewalFailures = new Counter({ name: 'pxe_node_cert_renewal_failures_total', help: "Renewals of the node's certificate that failed (each is tried again with backoff).", registers })
    new Gauge({
      name: 'pxe_node_cert_expiry_timestamp_seconds',
      help: "When the node's certificate in use expires, unix seconds (it is renewed at about two thirds of its lifetime).",
      registers,
      collect() {
        this.set(seconds(sources.certificateExpiry?.() ?? null))
      },
    })
    this.sessions = counter('pxe_node_sessions_total', 'Sessions of shards stopped by this node: deposited for the new owner, refused by the controller, or dropped (by reason).', 'result', SESSION_RESULTS, registers)
  }

  /** Counts one event (cheap: a few map look-ups). */
  observe(event: AgentEvent): void {
    switch (event.type) {
      case 'plan_accepted':
        return this.checkins.inc({ result: 'accepted' })
      case 'plan_refused':
        this.checkins.inc({ result: 'refused' })
        return this.refused.inc({ reason: event.reason })
      case 'checkin_failed':
        return this.checkins.inc({ result: 'failed' })
      case 'claim':
        return this.onClaim(event)
      case 'shard_started':
        this.resuming.delete(event.shardId)
        if (event.mode === 'resume') this.resumes.inc({ result: 'resumed' })
        return
      case 'resume_refused':
        this.resuming.delete(event.shardId)
        return this.resumes.inc({ result: 'refused' })
      case 'shard_start_failed':
        if (this.resuming.delete(event.shardId)) this.resumes.inc({ result: 'failed' })
        return
      case 'sessions_deposited':
        return this.sessions.inc({ result: 'deposited' }, event.shardIds.length)
      case 'sessions_refused':
        return this.sessions.inc({ result: 'refused' }, event.shardIds.length)
      case 'sessions_dropped':
        return this.sessions.inc({ result: event.reason }, event.shardIds.length)
      case 'halted':
        return this.resuming.clear()
      case 'certificate_renewal_failed':
        return this.renewalFailures.inc()
      default:
        return
    }
  }

  private onClaim(event: Extract<AgentEvent, { type: 'claim' }>): void {
    const { outcome } = event
    this.claims.inc({ result: claimResult(outcome) })
    if (outcome.kind !== 'granted') return
    if (outcome.mode === 'resume') this.resuming.add(event.shardId)
    if (event.waitedMs !== null) this.waits.observe({ mode: outcome.mode }, event.waitedMs / 1000)
  }
}

/** The gauges read at scrape time, from one status per scrape (so that they agree with each other). */
function stateGauges(sources: AgentMetricSources, registers: Registry[]): void {
  let current: AgentStatus | null = null
  // A scrape runs every collect in one synchronous pass: the status read first serves them all.
  const status = (): AgentStatus => {
    if (current === null) {
      current = sources.status()
      queueMicrotask(() => (current = null))
    }
    return current
  }
  const gauge = (name: string, help: string, read: (status: AgentStatus) => number) =>
    new Gauge({ name, help, registers, collect() { this.set(read(status())) } })
  gauge('pxe_node_plan_generation', 'Generation of the last plan this agent accepted (0: none yet).', (s) => s.acceptedGeneration ?? 0)
  gauge('pxe_node_reported_generation', 'Generation the agent reports in check-ins: the newest plan whose removals have all stopped (0: none yet).', (s) => s.reportedGeneration ?? 0)
  gauge('pxe_node_shards_assigned', 'Shards the accepted plan gives this node.', (s) => s.assigned.length)
  gauge('pxe_node_last_renewal_timestamp_seconds', 'When the answer to the last check-in whose plan was accepted arrived, unix seconds (0: never).', (s) => seconds(s.lastRenewalAckAt))
  gauge('pxe_node_authority_expiry_timestamp_seconds', "When the node's authority over its shards ends unless renewed, unix seconds (0: none held).", (s) => seconds(s.authorityEndsAt))
  new Gauge({
    name: 'pxe_node_shards',
    help: 'Shards by state, as the check-in reports them (ready: running).',
    labelNames: ['state'],
    registers,
    collect() {
      const h = sources.health()
      const values = { ready: h.ready_shards, starting: h.starting_shards, backoff: h.backoff_shards, fatal: h.fatal_shards }
      for (const state of HEALTH_STATES) this.set({ state }, values[state])
    },
  })
  new Gauge({
    name: 'pxe_node_agent_state',
    help: 'The agent state: 1 for the current one (idle, joining, active, no_authority, halted), else 0.',
    labelNames: ['state'],
    registers,
    collect() {
      const now = status().state
      for (const state of AGENT_STATES) this.set({ state }, state === now ? 1 : 0)
    },
  })
}

/** A counter whose every label value shows from the start (0), so that rate() sees the first increase. */
function counter<L extends string>(name: string, help: string, label: L, values: readonly string[], registers: Registry[]): Counter<L> {
  const c = new Counter({ name, help, labelNames: [label], registers })
  for (const value of values) c.inc({ [label]: value } as Record<L, string>, 0)
  return c
}
