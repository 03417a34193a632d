/**
 * Runs the host's shard callbacks: at most one start or stop at a time per shard (a stop waits for a
 * start still in progress, after asking it to give up), and a record of what runs. A stop that fails,
 * or does not end within the stop timeout, leaves the shard counted as running, so that it is retried
 * and its generation is not reported as applied.
 *
 * Every stop is bounded by the stop timeout, counted from the moment the stop is asked for: the
 * fail-safe begins that long (plus its margin) before the node's authority ends, so a stop that the
 * runner reports as ended has ended before any other node may be granted the shard.
 *
 * A start with a handed-over session whose RESUME the host reports refused (ResumeRefusedError) claims
 * a fresh Identify and starts again with `resume: null`; the shard stays `starting` meanwhile.
 */
import { ClaimAbortedError } from './claim-scheduler.js'
import type { AgentClock } from './clock.js'
import { isResumeRefused, type ResumableSession } from './session.js'

/** The shard a callback is about. */
export interface ShardInfo {
  readonly nodeId: string
  readonly shardId: number
  /** The plan generation that assigned the shard. */
  readonly generation: number
  /** The shard count the session is started under: a session belongs to it (Discord's num_shards). */
  readonly totalShards: number
  readonly maxConcurrency: number
  /**
   * Which set the shard was started for during a live reshard (SPEC "Live resharding"): `next` runs
   * beside the current set under the next shard count until the switch, when it becomes the current set
   * without a restart. Absent: `current`.
   */
  readonly set?: 'current' | 'next'
}

/** How a start began: RESUMEing a handed-over session, or with an Identify grant. */
export type StartMode = 'resume' | 'identify'

/** What a start callback learns about the shard it must run. */
export interface ShardContext extends ShardInfo {
  /** Aborted when the shard must stop while its start is still running: give up the start. */
  readonly signal: AbortSignal
  /**
   * The session the shard's previous owner handed over: RESUME it (no Identify grant was spent). When
   * the gateway refuses it, throw ResumeRefusedError: the agent claims a fresh Identify and calls
   * onStart again with `resume: null`. null: an Identify was granted for this start; IDENTIFY.
   */
  readonly resume: ResumableSession | null
  /**
   * Claims one more Identify grant for this shard (`"fresh": true`: any session the controller holds
   * for it is discarded), paced like every claim (bucket interval, handoff, daily budget, the agent's
   * request budget); resolves once granted. Call it before every IDENTIFY other than the one this start
   * was granted for (a re-identify after INVALID_SESSION, a refused resume the host handles itself).
   * Each call is one grant. Rejects with ClaimAbortedError once the shard stops, is lost, or the agent
   * stops, and with `options.signal`'s reason when that aborts.
   */
  claimFreshIdentify(options?: { readonly signal?: AbortSignal }): Promise<void>
  /**
   * How long ago (ms) the claim behind this start's latest Identify grant was sent: the start's own grant,
   * or the last one claimFreshIdentify obtained; Infinity while the start holds none (a resume). The
   * controller spaces a bucket's grants `identify_interval_ms` apart from its decision, which came after
   * the claim was sent, and Discord counts 5 s between the IDENTIFYs it receives: an IDENTIFY that goes
   * out more than `identify_interval_ms − 5000` after the claim may come too close to the bucket's next
   * grant, so a host that is that late claims a fresh grant first.
   */
  identifyGrantAgeMs(): number
  /**
   * True while the shard's events should reach the bot: always for a current-set shard (an old set keeps
   * delivering through a switch's grace, until it stops); for a live reshard's next set (`set: "next"`)
   * only once the node has accepted the plan of the switch. Until then the current set delivers every
   * guild's events; around the switch a guild's events may come twice, never not at all.
   */
  serving(): boolean
}

/**
 * Why the agent stops a shard. `plan`: the plan took the shard away (its session may be handed to the
 * new owner). `leave`: the node is leaving on purpose (SPEC "Leaving on purpose": agent.leave(), pxe-node's
 * SIGTERM), so every shard moves to another node and its session may be handed over as after a plan move.
 * `reshard`: the plan still gives the shard but under another total_shards or max_concurrency, so the
 * session (which belongs to its shard count) must end.
 */
export type StopReason = 'plan' | 'leave' | 'reshard' | 'lease_expiring' | 'certificate_refused' | 'shutdown'

/** What a stop callback learns. */
export interface ShardStopContext extends ShardInfo {
  readonly reason: StopReason
  /** Aborted when the stop timeout passes: the stop has failed, end it now (kill what it runs). */
  readonly signal: AbortSignal
  /** The stop timeout this stop runs under (ms). */
  readonly timeoutMs: number
}

/**
 * What a stop may resolve to: the session, still resumable (closed with a code other than 1000/1001),
 * for the shard's new owner. Only a stop with reason `plan` or `leave` deposits it; any other is discarded.
 */
export type StopResult = ResumableSession | null | undefined | void

/** The host's integration point with its gateway client; both may be async and may throw. */
export interface ShardCallbacks {
  /** Start the shard (resume `ctx.resume`, or IDENTIFY under the grant); resolve once it is started. */
  onStart(ctx: ShardContext): void | Promise<void>
  /** Stop the shard; resolve only once it no longer runs, within `ctx.timeoutMs`, with its session if resumable. */
  onStop(ctx: ShardStopContext): StopResult | Promise<StopResult>
}

/** Where a shard stands. `failed` means its start failed and nothing runs. */
export type ShardPhase = 'starting' | 'running' | 'stopping' | 'failed'

/** The values a shard's session was started under. */
export type SessionValues = Pick<ShardContext, 'totalShards' | 'maxConcurrency'>

/**
 * What a start is asked with: the shard, and the session handed over for it (or null), else when the
 * claim of the Identify grant it runs under was sent (clock ms).
 */
export type StartRequest = ShardInfo & {
  readonly resume: ResumableSession | null
  readonly grantClaimedAt?: number
  /** The runner's key for the shard (agent/shard-key.ts: shard count and number); absent: the shard number. */
  readonly key?: number
  /** ShardContext.serving (absent: always serving). */
  readonly serving?: () => boolean
}

interface Entry {
  phase: ShardPhase
  ctx: ShardContext
  op: Promise<void>
  failedAt: number
  /** Aborts a start in progress; aborted also means the start may have left something running. */
  readonly startAbort: AbortController
  /** Aborted when any stop of the shard begins: its fresh Identify claims end. */
  readonly life: AbortController
  /** When the claim of the latest Identify grant this start holds was sent (clock ms), or null. */
  grantClaimedAt: number | null
}

/** Reports from the runner to the agent. */
export interface ShardRunnerHooks {
  started(ctx: ShardContext, mode: StartMode): void
  startFailed(ctx: ShardContext, err: unknown): void
  /** The host could not resume the handed-over session: a fresh Identify is claimed, then onStart runs again. */
  resumeRefused(ctx: ShardContext): void
  stopped(ctx: ShardStopContext): void
  stopFailed(ctx: ShardStopContext, err: unknown): void
  /** The stop did not end within its timeout: it was abandoned and the shard may still be running. */
  stopTimedOut(ctx: ShardStopContext): void
  /** The stop returned a session, but it is not one to hand over (no plan move): dropped. */
  sessionDiscarded(ctx: ShardStopContext): void
  /** The stop was cut short by hurry() (the host stops at once): the shard may still be running, and is let go. */
  stopCutShort(ctx: ShardStopContext): void
}

/** What the runner needs besides the callbacks. */
export interface ShardRunnerDeps {
  readonly clock: AgentClock
  /** The stop timeout in force (ms); it may follow the lease. */
  stopTimeoutMs(): number
  /**
   * Claims a fresh Identify for a shard; resolves once granted, to when the granted claim was sent (clock
   * ms); rejects once `signal` aborts.
   */
  claimFresh(key: number, signal: AbortSignal): Promise<number>
}

class StopTimeout extends Error {}

/** Serializes the callbacks per shard and tracks phases. */
export class ShardRunner {
  private readonly entries = new Map<number, Entry>()
  /** The timeout of every stop under way: hurry() aborts them all. */
  private readonly stopsUnderWay = new Set<AbortController>()
  private hurried = false

  constructor(private readonly callbacks: ShardCallbacks, private readonly hooks: ShardRunnerHooks, private readonly deps: ShardRunnerDeps) {}

  /** Starts a shard unless the runner already holds its key in any phase. */
  start(request: StartRequest): void {
    const { grantClaimedAt, key: requestKey, serving = () => true, ...shard } = request
    const shardId = shard.shardId
    const key = requestKey ?? shardId
    if (this.entries.has(key)) return
    const startAbort = new AbortController()
    const life = new AbortController()
    const claimFreshIdentify = async (options?: { readonly signal?: AbortSignal }) => {
      entry.grantClaimedAt = await this.deps.claimFresh(key, options?.signal === undefined ? life.signal : AbortSignal.any([life.signal, options.signal]))
    }
    const identifyGrantAgeMs = () => (entry.grantClaimedAt === null ? Infinity : this.deps.clock.now() - entry.grantClaimedAt)
    const ctx: ShardContext = { ...shard, signal: startAbort.signal, claimFreshIdentify, identifyGrantAgeMs, serving }
    const entry: Entry = { phase: 'starting', ctx, op: Promise.resolve(), failedAt: 0, startAbort, life, grantClaimedAt: shard.resume === null ? (grantClaimedAt ?? null) : null }
    this.entries.set(key, entry)
    entry.op = (async () => {
      try {
        const mode = await this.runStart(entry)
        entry.phase = 'running'
        this.hooks.started(entry.ctx, mode)
      } catch (err) {
        entry.phase = 'failed'
        entry.failedAt = this.deps.clock.now()
        entry.life.abort(new ClaimAbortedError('shard_stopped', `shard ${shardId} failed to start`))
        this.hooks.startFailed(entry.ctx, err)
      }
    })()
  }

  /** Runs onStart; a refused resume claims a fresh Identify and runs it once more, as an Identify. */
  private async runStart(entry: Entry): Promise<StartMode> {
    const first = entry.ctx
    try {
      await this.callbacks.onStart(first)
      return first.resume === null ? 'identify' : 'resume'
    } catch (err) {
      if (first.resume === null || !isResumeRefused(err)) throw err
    }
    this.hooks.resumeRefused(first)
    await first.claimFreshIdentify() // rejects at once when the shard's stop begins meanwhile
    entry.ctx = { ...first, resume: null }
    await this.callbacks.onStart(entry.ctx)
    return 'identify'
  }

  /**
   * Stops a shard (after any start in progress), within the stop timeout; true once nothing of it runs.
   * A session the stop returns goes to `onSession` (a plan move), else it is discarded.
   */
  stop(key: number, reason: StopReason, onSession?: (value: unknown) => void): Promise<boolean> {
    const entry = this.entries.get(key)
    if (entry === undefined) return Promise.resolve(true)
    const shardId = entry.ctx.shardId
    if (entry.phase === 'starting') entry.startAbort.abort() // it must stop: a start still running gives up
    entry.life.abort(new ClaimAbortedError('shard_stopped', `shard ${shardId} is stopping`))
    const timeoutMs = this.deps.stopTimeoutMs()
    const timeout = new AbortController()
    const timer = this.deps.clock.setTimeout(() => timeout.abort(), timeoutMs)
    this.stopsUnderWay.add(timeout)
    const { nodeId, generation, totalShards, maxConcurrency, set } = entry.ctx
    const ctx: ShardStopContext = { nodeId, shardId, generation, totalShards, maxConcurrency, ...(set === undefined ? {} : { set }), reason, signal: timeout.signal, timeoutMs }
    const result = settleWithin(entry.op, timeout.signal)
      .then(async () => {
        if (this.entries.get(key) !== entry) return true // an earlier stop in the chain finished it
        // A start that failed by itself left nothing running; one cut short by this stop may have.
        if (entry.phase === 'failed' && !entry.startAbort.signal.aborted) {
          this.entries.delete(key)
          return true
        }
        entry.phase = 'stopping'
        const session = await settleWithin(Promise.resolve().then(() => this.callbacks.onStop(ctx)), timeout.signal, true)
        this.entries.delete(key)
        this.hooks.stopped(ctx)
        if (session !== undefined && session !== null) {
          if (onSession === undefined) this.hooks.sessionDiscarded(ctx)
          else onSession(session)
        }
        return true
      })
      .catch((err: unknown) => {
        if (this.hurried && err instanceof StopTimeout) {
          // cut short by hurry(): let go, not stopped again (the host is ending now)
          if (this.entries.get(key) === entry) {
            this.entries.delete(key)
            this.hooks.stopCutShort(ctx)
          }
          return false
        }
        entry.phase = 'running' // it may still run: keep it, so that the stop is retried
        if (err instanceof StopTimeout) this.hooks.stopTimedOut(ctx)
        else this.hooks.stopFailed(ctx, err)
        return false
      })
      .finally(() => {
        this.deps.clock.clearTimeout(timer)
        this.stopsUnderWay.delete(timeout)
      })
    entry.op = result.then(() => undefined)
    return result
  }

  /** Stops every shard the runner holds; true when all stopped. */
  async stopAll(reason: StopReason): Promise<boolean> {
    const results = await Promise.all([...this.entries.keys()].map((id) => this.stop(id, reason)))
    return results.every(Boolean)
  }

  /**
   * Ends every stop under way now, as if its timeout had passed (a stop command is killed with its process
   * group): the host stops at once (pxe-node's second signal). Those shards are let go, not stopped again;
   * they may still be running (hooks.stopCutShort). Stops asked for later run as usual.
   */
  hurry(): void {
    this.hurried = true
    for (const timeout of [...this.stopsUnderWay]) timeout.abort()
  }

  /** Keys of the shards in the given phase, ascending. */
  inPhase(phase: ShardPhase): number[] {
    const out: number[] = []
    for (const [id, entry] of this.entries) if (entry.phase === phase) out.push(id)
    return out.sort((a, b) => a - b)
  }

  /** The keys of every shard the runner holds (starting, running, stopping or failed). */
  held(): number[] {
    return [...this.entries.keys()]
  }

  /** True when the runner holds the key. */
  has(key: number): boolean {
    return this.entries.has(key)
  }

  /** The values the key's session was started under, or null when the runner does not hold it. */
  sessionValues(key: number): SessionValues | null {
    const entry = this.entries.get(key)
    return entry === undefined ? null : { totalShards: entry.ctx.totalShards, maxConcurrency: entry.ctx.maxConcurrency }
  }

  /** Drops failed shards whose failure is older than `ms`, so that they are claimed again. */
  forgetFailuresOlderThan(ms: number): void {
    const now = this.deps.clock.now()
    for (const [id, entry] of this.entries) if (entry.phase === 'failed' && now - entry.failedAt >= ms) this.entries.delete(id)
  }
}

/**
 * Resolves with `work`'s value, or rejects with StopTimeout once `signal` aborts first. With `rethrow`,
 * a rejection of `work` is passed on; otherwise only its settling counts (a start's own failure).
 * A callback that ignores the signal is abandoned, not awaited: its late outcome is dropped.
 */
function settleWithin(work: Promise<unknown>, signal: AbortSignal, rethrow = false): Promise<unknown> {
  return new Promise<unknown>((resolve, reject) => {
    const onAbort = () => reject(new StopTimeout('the stop timeout passed'))
    if (signal.aborted) return onAbort()
    signal.addEventListener('abort', onAbort, { once: true })
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        if (signal.aborted) return
        resolve(value)
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort)
        if (signal.aborted) return
        if (rethrow) reject(err)
        else resolve(undefined)
      },
    )
  })
}
