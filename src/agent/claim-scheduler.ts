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
 *
 * Shards are the agent's keys (agent/shard-key.ts): a live reshard's two sets share the buckets by shard number.
 *
 * A running shard's host may ask for a fresh Identify (its RESUME was refused, or Discord invalidated the
 * session): such a claim goes to the front of its bucket's line and is paced exactly like the others.
 */
import { Alarm, type AgentClock } from './clock.js'
import type { RequestBudget } from './request-budget.js'
import type { ResumableSession } from './session.js'
import { keyShard } from './shard-key.js'

/** What one claim came back with. `resume`: the controller handed over a session instead of an Identify. */
export type ClaimOutcome =
  | { readonly kind: 'granted'; readonly generation: number; readonly mode: 'identify' | 'resume' }
  | { readonly kind: 'wait'; readonly reason: 'bucket_busy' | 'handoff_pending' | 'daily_limit'; readonly retryAfterMs: number }
  | { readonly kind: 'not_owner' }
  | { readonly kind: 'rate_limited'; readonly retryAfterMs: number }
  | { readonly kind: 'failed'; readonly detail: string }

/** One claim's answer; a resume grant's session travels beside the outcome, which events and logs carry. */
export interface ClaimReply {
  readonly outcome: ClaimOutcome
  readonly resume: ResumableSession | null
}

/** Why a fresh Identify claim was given up. */
export type ClaimAbortReason = 'shard_stopped' | 'not_owner' | 'agent_stopped'

/** A fresh Identify claim ended without a grant: the shard stopped, the controller says it is not ours, or the agent stopped. */
export class ClaimAbortedError extends Error {
  override readonly name = 'ClaimAbortedError'
  constructor(readonly reason: ClaimAbortReason, message: string) {
    super(message)
  }
}

/** What the scheduler needs from the agent. */
export interface ClaimSchedulerDeps {
  readonly clock: AgentClock
  readonly budget: RequestBudget
  /** Sends one claim (`fresh`: with `"fresh": true`); must not throw (failures are an outcome). */
  claim(shardId: number, fresh: boolean): Promise<ClaimReply>
  /**
   * A claim was granted for a shard that is still wanted; `resume` is the session handed over, if any;
   * `claimedAt`: when the claim that was granted was sent (clock ms; the grant was decided after it).
   */
  onGranted(shardId: number, generation: number, resume: ResumableSession | null, claimedAt: number): void
  /**
   * Every outcome, for logs, events and metrics (not_owner shards are dropped from the queue). `waitedMs`,
   * for a grant only: how long the shard waited for it, from when it was first wanted (or its fresh claim asked).
   */
  onOutcome(shardId: number, outcome: ClaimOutcome, waitedMs: number | null): void
  /** Wait after a grant before the next claim in the same bucket (the controller's Identify interval, ms). */
  readonly identifyIntervalMs: number
  /** How often one handoff-waiting bucket is probed (ms). */
  readonly handoffPollMs: number
}

/** A host waiting for a fresh Identify grant. */
interface FreshClaim {
  readonly shard: number
  /** When the host asked (clock ms). */
  readonly since: number
  settled: boolean
  /** `claimedAt`: when the claim that was granted was sent (clock ms). */
  resolve(claimedAt: number): void
  reject(err: unknown): void
}

interface BucketState {
  queue: number[]
  /** Fresh claims of running shards; they go before the queue. */
  fresh: FreshClaim[]
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
  /** When each wanted shard began to wait for its grant (clock ms); kept across re-plans. */
  private wantedSince = new Map<number, number>()
  private maxConcurrency = 1
  /** The ordinary claim in flight (a fresh claim in flight sets `busy` only). */
  private inFlight: number | null = null
  private busy = false
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
      const fresh = [...this.buckets.values()].flatMap((state) => state.fresh)
      this.buckets.clear()
      this.maxConcurrency = maxConcurrency
      for (const claim of fresh) this.bucketOf(claim.shard).fresh.push(claim)
    }
    this.wanted = new Set(shards)
    const now = this.deps.clock.now()
    for (const shard of this.wantedSince.keys()) if (!this.wanted.has(shard)) this.wantedSince.delete(shard)
    for (const shard of this.wanted) if (!this.wantedSince.has(shard)) this.wantedSince.set(shard, now)
    const queues = new Map<number, number[]>()
    for (const shard of [...this.wanted].sort((a, b) => a - b)) {
      if (shard === this.inFlight) continue
      const bucket = keyShard(shard) % maxConcurrency
      const queue = queues.get(bucket)
      if (queue === undefined) queues.set(bucket, [shard])
      else queue.push(shard)
    }
    // Known buckets keep their waits (a re-plan must not reset the spacing after a grant).
    for (const state of this.buckets.values()) state.queue = []
    for (const [bucket, queue] of queues) this.bucketAt(bucket).queue = queue
    this.pump()
  }

  /**
   * Claims a fresh Identify (`"fresh": true`) for a shard this node runs; resolves once granted, to the
   * time (clock ms) the granted claim was sent. Paced as every claim; rejects with `signal`'s reason when
   * it aborts, or ClaimAbortedError.
   */
  claimFresh(shardId: number, signal: AbortSignal): Promise<number> {
    if (signal.aborted) return Promise.reject(signal.reason)
    if (this.stopped) return Promise.reject(new ClaimAbortedError('agent_stopped', 'the agent stopped'))
    return new Promise((resolve, reject) => {
      const onAbort = () => this.endFresh(claim, { error: signal.reason })
      const claim: FreshClaim = {
        shard: shardId,
        since: this.deps.clock.now(),
        settled: false,
        resolve: (claimedAt) => {
          signal.removeEventListener('abort', onAbort)
          resolve(claimedAt)
        },
        reject: (err) => {
          signal.removeEventListener('abort', onAbort)
          reject(err)
        },
      }
      signal.addEventListener('abort', onAbort, { once: true })
      this.bucketOf(shardId).fresh.push(claim)
      this.pump()
    })
  }

  /** Shards waiting for a claim (in flight included). */
  get pending(): number[] {
    return [...this.wanted]
  }

  /** Stops for good: no more claims, no timers. */
  stop(): void {
    this.stopped = true
    const fresh = [...this.buckets.values()].flatMap((state) => state.fresh)
    this.wanted.clear()
    this.wantedSince.clear()
    this.buckets.clear()
    this.wake.cancel()
    for (const claim of fresh) this.endFresh(claim, { error: new ClaimAbortedError('agent_stopped', 'the agent stopped') })
  }

  private bucketAt(bucket: number): BucketState {
    let state = this.buckets.get(bucket)
    if (state === undefined) {
      state = { queue: [], fresh: [], notBefore: 0, handoffUntil: null, lastTried: -Infinity }
      this.buckets.set(bucket, state)
    }
    return state
  }

  private bucketOf(shardId: number): BucketState {
    return this.bucketAt(keyShard(shardId) % this.maxConcurrency)
  }

  /**
   * Settles a fresh claim once: granted (`claimedAt` of the granted claim) or failed (a grant that comes
   * after an abort still paces its bucket).
   */
  private endFresh(claim: FreshClaim, end: { readonly claimedAt: number } | { readonly error: unknown }): void {
    if (claim.settled) return
    claim.settled = true
    for (const state of this.buckets.values()) state.fresh = state.fresh.filter((c) => c !== claim)
    if ('claimedAt' in end) claim.resolve(end.claimedAt)
    else claim.reject(end.error)
  }

  private pump(): void {
    if (this.stopped || this.busy) return
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
    const fresh = state.fresh.shift() ?? null
    const shard = fresh?.shard ?? state.queue.shift()!
    const probe = state.handoffUntil !== null
    state.lastTried = now
    if (probe) this.nextHandoffProbe = now + this.deps.handoffPollMs
    this.busy = true
    if (fresh === null) this.inFlight = shard
    void this.deps.claim(shard, fresh !== null).then((reply) => {
      this.busy = false
      this.inFlight = null
      if (!this.stopped) this.settle(shard, state, probe, reply, fresh, now)
      this.pump()
    })
  }

  /** The bucket to claim in now (least recently tried first), or the earliest time one is due. */
  private pick(now: number): { state: BucketState | null; at: number } {
    let best: BucketState | null = null
    let at = Infinity
    for (const state of this.buckets.values()) {
      if (state.queue.length === 0 && state.fresh.length === 0) continue
      const due = Math.max(this.pausedUntil, state.handoffUntil === null ? state.notBefore : Math.min(state.handoffUntil, this.nextHandoffProbe))
      if (due > now) {
        at = Math.min(at, due)
      } else if (best === null || state.lastTried < best.lastTried) {
        best = state
      }
    }
    return { state: best, at }
  }

  /**
   * Applies one answer: the bucket's pacing, then the claim's own fate (`fresh`: a host's fresh claim;
   * `sentAt`: when the claim went out).
   */
  private settle(shard: number, state: BucketState, probe: boolean, reply: ClaimReply, fresh: FreshClaim | null, sentAt: number): void {
    const { outcome } = reply
    const now = this.deps.clock.now()
    const stillWanted = this.wanted.has(shard)
    let waitedMs: number | null = null
    const again = () => {
      if (fresh === null) {
        if (stillWanted) state.queue.unshift(shard)
      } else if (!fresh.settled) {
        this.bucketOf(shard).fresh.unshift(fresh)
      }
    }
    if (outcome.kind !== 'failed') this.failures = 0
    if (probe && !(outcome.kind === 'wait' && outcome.reason === 'handoff_pending')) this.releaseHandoffWaits()
    switch (outcome.kind) {
      case 'granted':
        // A resume records no bucket grant at the controller: the bucket's next claim need not wait.
        if (outcome.mode === 'identify') state.notBefore = now + this.deps.identifyIntervalMs
        state.handoffUntil = null
        if (fresh !== null) {
          waitedMs = now - fresh.since
          this.endFresh(fresh, { claimedAt: sentAt })
          break
        }
        // A grant for a shard a re-plan dropped meanwhile ended nobody's wait.
        waitedMs = stillWanted ? now - (this.wantedSince.get(shard) ?? now) : null
        this.wanted.delete(shard)
        this.wantedSince.delete(shard)
        if (stillWanted) this.deps.onGranted(shard, outcome.generation, reply.resume, sentAt)
        break
      case 'wait':
        this.settleWait(state, outcome, now)
        again()
        break
      case 'not_owner':
        // Start nothing; the next plan says what this node owns.
        if (fresh === null) {
          this.wanted.delete(shard)
          this.wantedSince.delete(shard)
        } else this.endFresh(fresh, { error: new ClaimAbortedError('not_owner', `the controller says shard ${shard} is not this node's`) })
        break
      case 'rate_limited':
        this.pausedUntil = now + Math.max(outcome.retryAfterMs, 100)
        again()
        break
      case 'failed':
        this.failures += 1
        this.pausedUntil = now + Math.min(500 * 2 ** this.failures, MAX_FAILURE_BACKOFF_MS)
        again()
        break
    }
    this.deps.onOutcome(shard, outcome, waitedMs)
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
