/**
 * Paces Identify claims (SPEC "Identify claims"): one claim in flight per agent, one shard per bucket
 * at a time, each wait the controller names obeyed with a timer (never a busy loop), and every request
 * paid from the agent's request budget. A node with 128 shards therefore sends a few claims a second,
 * not 128 at once.
 *
 * `handoff_pending` is special: its `retry_after_ms` is when the previous owner's lease would run out
 * at the latest, but the previous owner usually releases the shard much sooner (it reports the new
 * generation after stopping). So one waiting bucket at a time is probed every `handoffPollMs` until
 * then; when a probe passes the handoff, every waiting bucket is tried again.
 */
import { Alarm, type AgentClock } from './clock.js'
import type { RequestBudget } from './request-budget.js'

/** What one claim came back with. */
export type ClaimOutcome =
  | { readonly kind: 'granted'; readonly generation: number }
  | { readonly kind: 'wait'; readonly reason: 'bucket_busy' | 'handoff_pending' | 'daily_limit'; readonly retryAfterMs: number }
  | { readonly kind: 'not_owner' }
  | { readonly kind: 'rate_limited'; readonly retryAfterMs: number }
  | { readonly kind: 'failed'; readonly detail: string }

/** What the scheduler needs from the agent. */
export interface ClaimSchedulerDeps {
  readonly clock: AgentClock
  readonly budget: RequestBudget
  /** Sends one claim; must not throw (failures are an outcome). */
  claim(shardId: number): Promise<ClaimOutcome>
  /** A claim was granted for a shard that is still wanted. */
  onGranted(shardId: number, generation: number): void
  /** Every outcome, for logs and events (not_owner shards are dropped from the queue). */
  onOutcome(shardId: number, outcome: ClaimOutcome): void
  /** Wait after a grant before the next claim in the same bucket (the controller's Identify interval, ms). */
  readonly identifyIntervalMs: number
  /** How often one handoff-waiting bucket is probed (ms). */
  readonly handoffPollMs: number
}

interface BucketState {
  queue: number[]
  notBefore: number
  /** Set while the bucket waits for a handoff: the latest moment the handoff must be released. */
  handoffUntil: number | null
  lastTried: number
}

const MAX_FAILURE_BACKOFF_MS = 10_000

/** Claims Identify for the wanted shards; see the module comment. */
export class ClaimScheduler {
  private buckets = new Map<number, BucketState>()
  private wanted = new Set<number>()
  private maxConcurrency = 1
  private inFlight: number | null = null
  private pausedUntil = 0
  private failures = 0
  private nextHandoffProbe = 0
  private stopped = false
  private readonly wake: Alarm

  constructor(private readonly deps: ClaimSchedulerDeps) {
    this.wake = new Alarm(deps.clock, () => this.pump())
  }

  /** Replaces the shards to claim (sorted or not); waits already learned for a bucket are kept. */
  setWanted(shards: Iterable<number>, maxConcurrency: number): void {
    if (maxConcurrency !== this.maxConcurrency) {
      this.buckets.clear()
      this.maxConcurrency = maxConcurrency
    }
    this.wanted = new Set(shards)
    const queues = new Map<number, number[]>()
    for (const shard of [...this.wanted].sort((a, b) => a - b)) {
      if (shard === this.inFlight) continue
      const bucket = shard % maxConcurrency
      const queue = queues.get(bucket)
      if (queue === undefined) queues.set(bucket, [shard])
      else queue.push(shard)
    }
    // Known buckets keep their waits (a re-plan must not reset the spacing after a grant).
    for (const state of this.buckets.values()) state.queue = []
    for (const [bucket, queue] of queues) {
      const state = this.buckets.get(bucket)
      if (state) state.queue = queue
      else this.buckets.set(bucket, { queue, notBefore: 0, handoffUntil: null, lastTried: -Infinity })
    }
    this.pump()
  }

  /** Shards waiting for a claim (in flight included). */
  get pending(): number[] {
    return [...this.wanted]
  }

  /** Stops for good: no more claims, no timers. */
  stop(): void {
    this.stopped = true
    this.wanted.clear()
    this.buckets.clear()
    this.wake.cancel()
  }

  private pump(): void {
    if (this.stopped || this.inFlight !== null) return
    this.wake.cancel()
    const now = this.deps.clock.now()
    const pick = this.pick(now)
    if (pick.state === null) {
      if (pick.at !== Infinity) this.wake.arm(pick.at - now)
      return
    }
    const wait = this.deps.budget.take()
    if (wait > 0) {
      this.wake.arm(wait)
      return
    }
    const state = pick.state
    const shard = state.queue.shift()!
    const probe = state.handoffUntil !== null
    state.lastTried = now
    if (probe) this.nextHandoffProbe = now + this.deps.handoffPollMs
    this.inFlight = shard
    void this.deps.claim(shard).then((outcome) => {
      this.inFlight = null
      if (!this.stopped) this.settle(shard, state, probe, outcome)
      this.pump()
    })
  }

  /** The bucket to claim in now (least recently tried first), or the earliest time one is due. */
  private pick(now: number): { state: BucketState | null; at: number } {
    let best: BucketState | null = null
    let at = Infinity
    for (const state of this.buckets.values()) {
      if (state.queue.length === 0) continue
      const due = Math.max(this.pausedUntil, state.handoffUntil === null ? state.notBefore : Math.min(state.handoffUntil, this.nextHandoffProbe))
      if (due > now) {
        at = Math.min(at, due)
      } else if (best === null || state.lastTried < best.lastTried) {
        best = state
      }
    }
    return { state: best, at }
  }

  private settle(shard: number, state: BucketState, probe: boolean, outcome: ClaimOutcome): void {
    const now = this.deps.clock.now()
    const stillWanted = this.wanted.has(shard)
    if (outcome.kind !== 'failed') this.failures = 0
    if (probe && !(outcome.kind === 'wait' && outcome.reason === 'handoff_pending')) this.releaseHandoffWaits()
    switch (outcome.kind) {
      case 'granted':
        state.notBefore = now + this.deps.identifyIntervalMs
        state.handoffUntil = null
        this.wanted.delete(shard)
        if (stillWanted) this.deps.onGranted(shard, outcome.generation)
        break
      case 'wait':
        this.settleWait(state, outcome, now)
        if (stillWanted) state.queue.unshift(shard)
        break
      case 'not_owner':
        this.wanted.delete(shard) // start nothing; the next plan says what this node owns
        break
      case 'rate_limited':
        this.pausedUntil = now + Math.max(outcome.retryAfterMs, 100)
        if (stillWanted) state.queue.unshift(shard)
        break
      case 'failed':
        this.failures += 1
        this.pausedUntil = now + Math.min(500 * 2 ** this.failures, MAX_FAILURE_BACKOFF_MS)
        if (stillWanted) state.queue.unshift(shard)
        break
    }
    this.deps.onOutcome(shard, outcome)
  }

  private settleWait(state: BucketState, outcome: Extract<ClaimOutcome, { kind: 'wait' }>, now: number): void {
    if (outcome.reason === 'handoff_pending') {
      state.handoffUntil = now + outcome.retryAfterMs
      this.nextHandoffProbe = Math.max(this.nextHandoffProbe, now + this.deps.handoffPollMs)
      return
    }
    state.handoffUntil = null
    if (outcome.reason === 'daily_limit') {
      this.pausedUntil = now + outcome.retryAfterMs // the budget is shared by every bucket
      return
    }
    // A few ms past the exact instant: the controller counts the interval on its own clock.
    state.notBefore = now + outcome.retryAfterMs + 5 + Math.floor(this.deps.clock.random() * 20)
  }

  private releaseHandoffWaits(): void {
    for (const state of this.buckets.values()) {
      if (state.handoffUntil === null) continue
      state.handoffUntil = null
      state.notBefore = 0
    }
  }
}
