/**
 * What a light node runs while the benchmark tracks moves (the drain phase): its shards with synthetic
 * Discord sessions, the sessions of stopped shards waiting for the release check-in (SPEC "Session
 * handoff"), and the shards it must claim, with the waits the controller named. Pure: times are passed in.
 *
 * A shard is stopped only when the plan takes it away; its session is deposited with the next check-in,
 * the one that reports the plan's generation (so it releases the handoff). A gained shard runs once a
 * claim is granted: `mode: "resume"` carries the previous owner's session on, `"identify"` starts a new one.
 */

/** A session as the deposit carries it (SPEC "Session handoff"). */
export interface DepositEntry {
  readonly shard_id: number
  readonly session_id: string
  readonly sequence: number
  readonly resume_url: string
}

/** The resume URL every synthetic session names (a host the controller's default allowed hosts admit). */
export const BENCH_RESUME_URL = 'wss://gateway.discord.gg'
/** Most entries one check-in may carry (SPEC). */
const MAX_DEPOSIT = 128
/** A handoff-waiting shard is probed this often (the agent's default handoffPollMs). */
export const HANDOFF_PROBE_MS = 1000
/** After an Identify grant, a bucket's next claim waits the controller's Identify interval (the agent's default). */
export const IDENTIFY_INTERVAL_MS = 5100

interface Running {
  readonly sessionId: string
  sequence: number
}

/** The next claim to send, or when one is due (null: nothing to claim). */
export type NextClaim = { readonly shard: number } | { readonly at: number } | null

/** See the module comment. */
export class ShardBook {
  private readonly running = new Map<number, Running>()
  private readonly deposits = new Map<number, DepositEntry>()
  /** Shards to claim → not before (ms). */
  private readonly wanted = new Map<number, number>()
  /** Bucket → not before (ms), after an Identify grant or a bucket_busy answer. */
  private readonly bucketFree = new Map<number, number>()
  private started = 0

  /** @param tag letters and digits naming this node in its synthetic session IDs */
  constructor(private readonly tag: string) {}

  /** Shards running now. */
  get runningCount(): number {
    return this.running.size
  }

  /** Shards waiting for a claim. */
  get wantedCount(): number {
    return this.wanted.size
  }

  /** Sessions waiting for the release check-in. */
  get depositCount(): number {
    return this.deposits.size
  }

  /** Starts tracking: every shard of the range runs (the steady state before a move). */
  begin(rangeStart: number, rangeCount: number): void {
    this.clear()
    for (let s = rangeStart; s < rangeStart + rangeCount; s++) this.running.set(s, this.newSession(s))
  }

  /** Forgets everything (tracking ends). */
  clear(): void {
    this.running.clear()
    this.deposits.clear()
    this.wanted.clear()
    this.bucketFree.clear()
  }

  /**
   * A plan with this range arrived: stops the running shards it no longer holds (their sessions wait for
   * the release check-in) and wants the ones it adds. Returns how many shards it stopped.
   */
  applyPlan(rangeStart: number, rangeCount: number): number {
    const end = rangeStart + rangeCount
    const inRange = (s: number) => s >= rangeStart && s < end
    let stopped = 0
    for (const [shard, session] of this.running) {
      if (inRange(shard)) continue
      this.running.delete(shard)
      this.deposits.set(shard, { shard_id: shard, session_id: session.sessionId, sequence: session.sequence, resume_url: BENCH_RESUME_URL })
      stopped += 1
    }
    for (const shard of this.wanted.keys()) if (!inRange(shard)) this.wanted.delete(shard)
    for (let s = rangeStart; s < end; s++) if (!this.running.has(s) && !this.wanted.has(s)) this.wanted.set(s, 0)
    return stopped
  }

  /** Shards of the range that do not run. */
  missing(rangeStart: number, rangeCount: number): number {
    let missing = 0
    for (let s = rangeStart; s < rangeStart + rangeCount; s++) if (!this.running.has(s)) missing += 1
    return missing
  }

  /** The sessions the next check-in carries (they stay until depositsDone). */
  pendingDeposits(): DepositEntry[] {
    return [...this.deposits.values()].slice(0, MAX_DEPOSIT)
  }

  /** The check-in that carried `entries` was answered (200: held; 400: refused, and so never to be sent again). */
  depositsDone(entries: readonly DepositEntry[]): void {
    for (const e of entries) this.deposits.delete(e.shard_id)
  }

  /** The claim to send now, or when the next one is due: a wanted shard whose own wait and bucket's wait are over. */
  nextClaim(now: number, maxConcurrency: number): NextClaim {
    let at = Infinity
    for (const [shard, notBefore] of this.wanted) {
      const due = Math.max(notBefore, this.bucketFree.get(shard % maxConcurrency) ?? 0)
      if (due <= now) return { shard }
      at = Math.min(at, due)
    }
    return at === Infinity ? null : { at }
  }

  /**
   * A claim was granted: the shard runs, resuming the session handed over or a new one. Returns false
   * when the resumed session is not this shard's (the controller handed out another shard's session).
   */
  granted(shard: number, now: number, maxConcurrency: number, resumed: { readonly session_id: string; readonly sequence: number } | null): boolean {
    this.wanted.delete(shard)
    if (resumed === null) {
      this.bucketFree.set(shard % maxConcurrency, now + IDENTIFY_INTERVAL_MS)
      this.running.set(shard, this.newSession(shard))
      return true
    }
    // Discord replays what the session missed; the new owner carries on from a later sequence.
    this.running.set(shard, { sessionId: resumed.session_id, sequence: resumed.sequence + 1 })
    return resumed.session_id.startsWith(`b${shard}n`)
  }

  /** `handoff_pending`: probed again soon (the previous owner usually releases well before its lease ends). */
  waitHandoff(shard: number, now: number, retryAfterMs: number): void {
    if (this.wanted.has(shard)) this.wanted.set(shard, now + Math.min(retryAfterMs, HANDOFF_PROBE_MS))
  }

  /** `bucket_busy` or `daily_limit`: the bucket waits as long as the controller said (and a little more). */
  waitBucket(shard: number, now: number, retryAfterMs: number, maxConcurrency: number): void {
    this.bucketFree.set(shard % maxConcurrency, now + retryAfterMs + 10)
  }

  /** A claim failed for another reason: this shard waits `ms`. */
  backOff(shard: number, now: number, ms: number): void {
    if (this.wanted.has(shard)) this.wanted.set(shard, now + ms)
  }

  /** `not_owner`: the controller's plan moved on; the next plan says what to claim. */
  drop(shard: number): void {
    this.wanted.delete(shard)
  }

  private newSession(shard: number): Running {
    this.started += 1
    return { sessionId: `b${shard}n${this.tag}k${this.started}`, sequence: 1 }
  }
}
