// The agent's metrics from its events and status, on a manual clock: counters per event, gauges read at
// scrape time, Identify waits measured by a real ClaimScheduler, and a registry of each agent's own.
import t from 'tap'
import { register as globalRegistry } from 'prom-client'
import type { AgentEvent } from '../../src/agent/agent-events.js'
import { AgentMetrics } from '../../src/agent/agent-metrics.js'
import type { ShardHealth } from '../../src/agent/agent-options.js'
import type { AgentStatus } from '../../src/agent/agent-status.js'
import { ClaimScheduler, type ClaimOutcome } from '../../src/agent/claim-scheduler.js'
import { PLAN_REFUSAL_REASONS } from '../../src/agent/plan-verifier.js'
import { RequestBudget } from '../../src/agent/request-budget.js'
import { FakeClock } from './fake-clock.js'
import { metricNames, sample } from './metrics-text.js'

const IDLE: AgentStatus = {
  nodeId: 'node-m', state: 'joining', acceptedGeneration: null, reportedGeneration: null, assigned: [], running: [], starting: [],
  stopping: [], failed: [], claiming: [], next: null, lastRenewalSentAt: null, lastRenewalAckAt: null, authorityEndsAt: null,
  controller: 'https://127.0.0.1:1', lastError: null, halted: null,
}

/** Metrics over a status and health the test changes at will. */
function harness() {
  const h = {
    status: IDLE,
    health: { ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 } as ShardHealth,
    metrics: null as unknown as AgentMetrics,
    text: () => h.metrics.registry.metrics(),
  }
  h.metrics = new AgentMetrics({ status: () => h.status, health: () => h.health })
  return h
}

const accepted = (generation: number): AgentEvent => ({ type: 'plan_accepted', generation, assigned: [0, 1], changed: true, controller: 'c' })
const claim = (shardId: number, outcome: ClaimOutcome, waitedMs: number | null = null): AgentEvent => ({ type: 'claim', shardId, outcome, waitedMs })
const GRANT: ClaimOutcome = { kind: 'granted', generation: 2, mode: 'identify' }
const RESUME: ClaimOutcome = { kind: 'granted', generation: 2, mode: 'resume' }

t.test('before any plan: generation, renewal and authority are 0, the state is joining, every counter shows 0', async (t) => {
  const text = await harness().text()
  t.equal(sample(text, 'pxe_node_plan_generation'), 0)
  t.equal(sample(text, 'pxe_node_last_renewal_timestamp_seconds'), 0)
  t.equal(sample(text, 'pxe_node_authority_expiry_timestamp_seconds'), 0)
  t.equal(sample(text, 'pxe_node_agent_state{state="joining"}'), 1)
  t.equal(sample(text, 'pxe_node_agent_state{state="active"}'), 0)
  for (const reason of [...PLAN_REFUSAL_REASONS, 'plain_mismatch']) t.equal(sample(text, `pxe_node_plans_refused_total{reason="${reason}"}`), 0, reason)
  for (const result of ['granted', 'resumed', 'bucket_busy', 'handoff_pending', 'daily_limit', 'not_owner']) t.equal(sample(text, `pxe_node_identify_claims_total{result="${result}"}`), 0, result)
  for (const result of ['resumed', 'refused', 'failed']) t.equal(sample(text, `pxe_node_resumes_total{result="${result}"}`), 0, result)
  t.equal(sample(text, 'pxe_node_identify_wait_seconds_count{mode="identify"}'), 0)
})

t.test('the gauges follow the status and the check-in health at each scrape', async (t) => {
  const clock = new FakeClock()
  const h = harness()
  await clock.advance(90_000)
  h.status = { ...IDLE, state: 'active', acceptedGeneration: 7, reportedGeneration: 6, assigned: [0, 1, 2], running: [0, 1], lastRenewalAckAt: clock.wallNow(), authorityEndsAt: clock.wallNow() + 30_000 }
  h.health = { ready_shards: 2, starting_shards: 1, backoff_shards: 0, fatal_shards: 1 }
  const text = await h.text()
  t.equal(sample(text, 'pxe_node_plan_generation'), 7)
  t.equal(sample(text, 'pxe_node_reported_generation'), 6)
  t.equal(sample(text, 'pxe_node_shards_assigned'), 3)
  t.equal(sample(text, 'pxe_node_shards{state="ready"}'), 2, 'ready: the shards running')
  t.equal(sample(text, 'pxe_node_shards{state="starting"}'), 1)
  t.equal(sample(text, 'pxe_node_shards{state="backoff"}'), 0)
  t.equal(sample(text, 'pxe_node_shards{state="fatal"}'), 1)
  t.equal(sample(text, 'pxe_node_last_renewal_timestamp_seconds'), clock.wallNow() / 1000, 'unix seconds')
  t.equal(sample(text, 'pxe_node_authority_expiry_timestamp_seconds'), (clock.wallNow() + 30_000) / 1000)
  t.equal(sample(text, 'pxe_node_agent_state{state="active"}'), 1)
  t.equal(sample(text, 'pxe_node_agent_state{state="joining"}'), 0)
  h.status = { ...h.status, state: 'no_authority', acceptedGeneration: 8 }
  const later = await h.text()
  t.equal(sample(later, 'pxe_node_plan_generation'), 8, 'read again at the next scrape')
  t.equal(sample(later, 'pxe_node_agent_state{state="no_authority"}'), 1)
})

t.test('check-ins and refused plans are counted by result and by the verifier\'s reason', async (t) => {
  const h = harness()
  const refused = (reason: Extract<AgentEvent, { type: 'plan_refused' }>['reason']): AgentEvent => ({ type: 'plan_refused', reason, detail: 'd', controller: 'c' })
  for (const event of [accepted(1), accepted(2), refused('bad_signature'), refused('generation_rollback'), refused('generation_rollback'), refused('wrong_subject'), refused('expired'), refused('plain_mismatch'), { type: 'checkin_failed', detail: 'ECONNREFUSED' } as AgentEvent]) {
    h.metrics.observe(event)
  }
  const text = await h.text()
  t.equal(sample(text, 'pxe_node_checkins_total{result="accepted"}'), 2)
  t.equal(sample(text, 'pxe_node_checkins_total{result="refused"}'), 6)
  t.equal(sample(text, 'pxe_node_checkins_total{result="failed"}'), 1)
  t.equal(sample(text, 'pxe_node_plans_refused_total{reason="bad_signature"}'), 1)
  t.equal(sample(text, 'pxe_node_plans_refused_total{reason="generation_rollback"}'), 2)
  t.equal(sample(text, 'pxe_node_plans_refused_total{reason="wrong_subject"}'), 1)
  t.equal(sample(text, 'pxe_node_plans_refused_total{reason="expired"}'), 1)
  t.equal(sample(text, 'pxe_node_plans_refused_total{reason="plain_mismatch"}'), 1)
  t.equal(sample(text, 'pxe_node_plans_refused_total{reason="unknown_kid"}'), 0)
})

t.test('Identify waits: measured by the scheduler on the mock clock, from when each shard was wanted to its grant', async (t) => {
  const clock = new FakeClock()
  const h = harness()
  let last = -Infinity
  let busyOnce = true
  // One bucket: the controller grants one Identify per 5000 ms; the first claim of shard 2 is told bucket_busy.
  const answer = (shard: number): ClaimOutcome => {
    if (shard === 2 && busyOnce) {
      busyOnce = false
      return { kind: 'wait', reason: 'bucket_busy', retryAfterMs: 1000 }
    }
    if (clock.now() - last < 5000) return { kind: 'wait', reason: 'bucket_busy', retryAfterMs: last + 5000 - clock.now() }
    last = clock.now()
    return GRANT
  }
  const scheduler = new ClaimScheduler({
    clock,
    budget: new RequestBudget(3, 8, () => clock.now()),
    identifyIntervalMs: 5100,
    handoffPollMs: 1000,
    claim: async (shard) => ({ outcome: answer(shard), resume: null }),
    onGranted: () => undefined,
    onOutcome: (shardId, outcome, waitedMs) => h.metrics.observe(claim(shardId, outcome, waitedMs)),
  })
  scheduler.setWanted([0, 1, 2], 1)
  await clock.advance(30_000)
  scheduler.stop()
  const text = await h.text()
  t.equal(sample(text, 'pxe_node_identify_claims_total{result="granted"}'), 3)
  t.ok(sample(text, 'pxe_node_identify_claims_total{result="bucket_busy"}')! >= 1, 'the busy answer is counted')
  t.equal(sample(text, 'pxe_node_identify_wait_seconds_count{mode="identify"}'), 3, 'one wait per grant')
  t.equal(sample(text, 'pxe_node_identify_wait_seconds_bucket{le="0.1",mode="identify"}'), 1, 'the first shard was granted at once')
  t.equal(sample(text, 'pxe_node_identify_wait_seconds_bucket{le="5",mode="identify"}'), 1)
  t.equal(sample(text, 'pxe_node_identify_wait_seconds_bucket{le="10",mode="identify"}'), 2, 'the second waited one interval (5.1 s)')
  t.equal(sample(text, 'pxe_node_identify_wait_seconds_bucket{le="30",mode="identify"}'), 3, 'the third two, and its busy answer')
  const sum = sample(text, 'pxe_node_identify_wait_seconds_sum{mode="identify"}')!
  t.ok(sum > 15 && sum < 17, `the waits add up to about 5.1 + 10.2 s plus the busy answer's second (${sum})`)
})

t.test('every claim result is counted; a resume grant is "resumed" and its wait is of mode resume', async (t) => {
  const h = harness()
  const outcomes: ClaimOutcome[] = [
    GRANT, RESUME,
    { kind: 'wait', reason: 'bucket_busy', retryAfterMs: 1 }, { kind: 'wait', reason: 'handoff_pending', retryAfterMs: 1 },
    { kind: 'wait', reason: 'daily_limit', retryAfterMs: 1 }, { kind: 'not_owner' }, { kind: 'rate_limited', retryAfterMs: 1 },
    { kind: 'failed', detail: 'ECONNRESET' },
  ]
  outcomes.forEach((outcome, i) => h.metrics.observe(claim(i, outcome, outcome.kind === 'granted' ? 2000 : null)))
  const text = await h.text()
  for (const result of ['granted', 'resumed', 'bucket_busy', 'handoff_pending', 'daily_limit', 'not_owner', 'rate_limited', 'failed']) {
    t.equal(sample(text, `pxe_node_identify_claims_total{result="${result}"}`), 1, result)
  }
  t.equal(sample(text, 'pxe_node_identify_wait_seconds_count{mode="resume"}'), 1)
  t.equal(sample(text, 'pxe_node_identify_wait_seconds_sum{mode="resume"}'), 2)
})

t.test('resumes by result: resumed, refused by the gateway, failed otherwise; an identify start that fails is no resume', async (t) => {
  const h = harness()
  const events: AgentEvent[] = [
    claim(1, RESUME, 10), { type: 'shard_started', shardId: 1, generation: 2, mode: 'resume' },
    claim(2, RESUME, 10), { type: 'resume_refused', shardId: 2 }, claim(2, GRANT, 5100), { type: 'shard_started', shardId: 2, generation: 2, mode: 'identify' },
    claim(3, RESUME, 10), { type: 'shard_start_failed', shardId: 3, detail: 'exit 1' },
    claim(4, GRANT, 10), { type: 'shard_start_failed', shardId: 4, detail: 'exit 1' },
  ]
  for (const event of events) h.metrics.observe(event)
  const text = await h.text()
  t.equal(sample(text, 'pxe_node_resumes_total{result="resumed"}'), 1)
  t.equal(sample(text, 'pxe_node_resumes_total{result="refused"}'), 1)
  t.equal(sample(text, 'pxe_node_resumes_total{result="failed"}'), 1)
})

t.test('sessions: deposited, refused and dropped count the shards they name', async (t) => {
  const h = harness()
  h.metrics.observe({ type: 'sessions_deposited', shardIds: [1, 2, 3], controller: 'c' })
  h.metrics.observe({ type: 'sessions_refused', shardIds: [4], controller: 'c', status: 400 })
  h.metrics.observe({ type: 'sessions_dropped', reason: 'expired', shardIds: [5, 6], detail: 'd' })
  const text = await h.text()
  t.equal(sample(text, 'pxe_node_sessions_total{result="deposited"}'), 3)
  t.equal(sample(text, 'pxe_node_sessions_total{result="refused"}'), 1)
  t.equal(sample(text, 'pxe_node_sessions_total{result="expired"}'), 2)
  t.equal(sample(text, 'pxe_node_sessions_total{result="given_back"}'), 0)
})

t.test('each agent has a registry of its own: two in one process, nothing on the global registry, no process metrics', async (t) => {
  const a = harness()
  const b = harness()
  a.metrics.observe(accepted(1))
  t.equal(sample(await a.text(), 'pxe_node_checkins_total{result="accepted"}'), 1)
  t.equal(sample(await b.text(), 'pxe_node_checkins_total{result="accepted"}'), 0, 'the other agent counts nothing')
  t.notOk(metricNames(await globalRegistry.metrics()).some((name) => name.startsWith('pxe_node_')), 'the global registry holds no agent metric')
  const names = metricNames(await a.text())
  t.ok(names.every((name) => name.startsWith('pxe_node_')), `only pxe_node_* metrics (${names.join(', ')})`)
})

t.test('label values are bounded: no node, shard or session ID appears in any label', async (t) => {
  const h = harness()
  h.metrics.observe(claim(77, GRANT, 1))
  h.metrics.observe({ type: 'shard_started', shardId: 77, generation: 2, mode: 'identify' })
  const text = await h.text()
  t.notMatch(text, /node-m|="77"/)
})

t.test('one scrape reads the status once, so that its gauges agree; the next scrape reads it again', async (t) => {
  let reads = 0
  const metrics = new AgentMetrics({ status: () => (reads++, IDLE), health: () => ({ ready_shards: 0, starting_shards: 0, backoff_shards: 0, fatal_shards: 0 }) })
  await metrics.registry.metrics()
  t.equal(reads, 1)
  await metrics.registry.metrics()
  t.equal(reads, 2)
})
