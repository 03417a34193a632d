/**
 * Runs the host's shard callbacks: at most one start or stop at a time per shard (a stop waits for a
 * start still in progress, after asking it to give up), and a record of what runs. A stop that fails,
 * or does not end within the stop timeout, leaves the shard counted as running, so that it is retried
 * and its generation is not reported as applied.
 *
 * Every stop is bounded by the stop timeout, counted from the moment the stop is asked for: the
 * fail-safe begins that long (plus its margin) before the node's authority ends, so a stop that the
 * runner reports as ended has ended before any other node may be granted the shard.
 */
import type { AgentClock } from './clock.js'

/** What a start callback learns about the shard it must run. */
export interface ShardContext {
  readonly nodeId: string
  readonly shardId: number
  /** The plan generation that assigned the shard. */
  readonly generation: number
  /** The shard count the session is started under: a session belongs to it (Discord's num_shards). */
  readonly totalShards: number
  readonly maxConcurrency: number
  /** Aborted when the shard must stop while its start is still running: give up the start. */
  readonly signal: AbortSignal
}

/**
 * Why the agent stops a shard. `reshard`: the plan still gives the shard but under another
 * total_shards or max_concurrency, so the session (which belongs to its shard count) must end.
 */
export type StopReason = 'plan' | 'reshard' | 'lease_expiring' | 'certificate_refused' | 'shutdown'

/** What a stop callback learns. */
export interface ShardStopContext extends ShardContext {
  readonly reason: StopReason
  /** Aborted when the stop timeout passes: the stop has failed, end it now (kill what it runs). */
  readonly signal: AbortSignal
  /** The stop timeout this stop runs under (ms). */
  readonly timeoutMs: number
}

/** The host's integration point with its gateway client; both may be async and may throw. */
export interface ShardCallbacks {
  /** Start the shard (the Identify claim was granted); resolve once it is started. */
  onStart(ctx: ShardContext): void | Promise<void>
  /** Stop the shard; resolve only once it no longer runs, within `ctx.timeoutMs`. */
  onStop(ctx: ShardStopContext): void | Promise<void>
}

/** Where a shard stands. `failed` means its start failed and nothing runs. */
export type ShardPhase = 'starting' | 'running' | 'stopping' | 'failed'

/** The values a shard's session was started under. */
export type SessionValues = Pick<ShardContext, 'totalShards' | 'maxConcurrency'>

interface Entry {
  phase: ShardPhase
  ctx: ShardContext
  op: Promise<void>
  failedAt: number
  /** Aborts a start in progress; aborted also means the start may have left something running. */
  readonly startAbort: AbortController
}

/** Reports from the runner to the agent. */
export interface ShardRunnerHooks {
  started(ctx: ShardContext): void
  startFailed(ctx: ShardContext, err: unknown): void
  stopped(ctx: ShardStopContext): void
  stopFailed(ctx: ShardStopContext, err: unknown): void
  /** The stop did not end within its timeout: it was abandoned and the shard may still be running. */
  stopTimedOut(ctx: ShardStopContext): void
}

/** What the runner needs besides the callbacks. */
export interface ShardRunnerDeps {
  readonly clock: AgentClock
  /** The stop timeout in force (ms); it may follow the lease. */
  stopTimeoutMs(): number
}

class StopTimeout extends Error {}

/** Serializes the callbacks per shard and tracks phases. */
export class ShardRunner {
  private readonly entries = new Map<number, Entry>()

  constructor(private readonly callbacks: ShardCallbacks, private readonly hooks: ShardRunnerHooks, private readonly deps: ShardRunnerDeps) {}

  /** Starts a shard unless the runner already holds it in any phase. */
  start(ctx: Omit<ShardContext, 'signal'>): void {
    if (this.entries.has(ctx.shardId)) return
    const startAbort = new AbortController()
    const entry: Entry = { phase: 'starting', ctx: { ...ctx, signal: startAbort.signal }, op: Promise.resolve(), failedAt: 0, startAbort }
    this.entries.set(ctx.shardId, entry)
    entry.op = (async () => {
      try {
        await this.callbacks.onStart(entry.ctx)
        entry.phase = 'running'
        this.hooks.started(entry.ctx)
      } catch (err) {
        entry.phase = 'failed'
        entry.failedAt = this.deps.clock.now()
        this.hooks.startFailed(entry.ctx, err)
      }
    })()
  }

  /** Stops a shard (after any start in progress), within the stop timeout; true once nothing of it runs. */
  stop(shardId: number, reason: StopReason): Promise<boolean> {
    const entry = this.entries.get(shardId)
    if (entry === undefined) return Promise.resolve(true)
    if (entry.phase === 'starting') entry.startAbort.abort() // it must stop: a start still running gives up
    const timeoutMs = this.deps.stopTimeoutMs()
    const timeout = new AbortController()
    const timer = this.deps.clock.setTimeout(() => timeout.abort(), timeoutMs)
    const ctx: ShardStopContext = { ...entry.ctx, reason, signal: timeout.signal, timeoutMs }
    const result = settleWithin(entry.op, timeout.signal)
      .then(async () => {
        if (this.entries.get(shardId) !== entry) return true // an earlier stop in the chain finished it
        // A start that failed by itself left nothing running; one cut short by this stop may have.
        if (entry.phase === 'failed' && !entry.startAbort.signal.aborted) {
          this.entries.delete(shardId)
          return true
        }
        entry.phase = 'stopping'
        await settleWithin(Promise.resolve().then(() => this.callbacks.onStop(ctx)), timeout.signal, true)
        this.entries.delete(shardId)
        this.hooks.stopped(ctx)
        return true
      })
      .catch((err: unknown) => {
        entry.phase = 'running' // it may still run: keep it, so that the stop is retried
        if (err instanceof StopTimeout) this.hooks.stopTimedOut(ctx)
        else this.hooks.stopFailed(ctx, err)
        return false
      })
      .finally(() => this.deps.clock.clearTimeout(timer))
    entry.op = result.then(() => undefined)
    return result
  }

  /** Stops every shard the runner holds; true when all stopped. */
  async stopAll(reason: StopReason): Promise<boolean> {
    const results = await Promise.all([...this.entries.keys()].map((id) => this.stop(id, reason)))
    return results.every(Boolean)
  }

  /** Shards in the given phase, ascending. */
  inPhase(phase: ShardPhase): number[] {
    const out: number[] = []
    for (const [id, entry] of this.entries) if (entry.phase === phase) out.push(id)
    return out.sort((a, b) => a - b)
  }

  /** Every shard the runner holds (starting, running, stopping or failed). */
  held(): number[] {
    return [...this.entries.keys()]
  }

  /** True when the runner holds the shard. */
  has(shardId: number): boolean {
    return this.entries.has(shardId)
  }

  /** The values the shard's session was started under, or null when the runner does not hold it. */
  sessionValues(shardId: number): SessionValues | null {
    const entry = this.entries.get(shardId)
    return entry === undefined ? null : { totalShards: entry.ctx.totalShards, maxConcurrency: entry.ctx.maxConcurrency }
  }

  /** Drops failed shards whose failure is older than `ms`, so that they are claimed again. */
  forgetFailuresOlderThan(ms: number): void {
    const now = this.deps.clock.now()
    for (const [id, entry] of this.entries) if (entry.phase === 'failed' && now - entry.failedAt >= ms) this.entries.delete(id)
  }
}

/**
 * Resolves as `work` does, or rejects with StopTimeout once `signal` aborts first. With `rethrow`,
 * a rejection of `work` is passed on; otherwise only its settling counts (a start's own failure).
 * A callback that ignores the signal is abandoned, not awaited: its late outcome is dropped.
 */
function settleWithin(work: Promise<unknown>, signal: AbortSignal, rethrow = false): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(new StopTimeout('the stop timeout passed'))
    if (signal.aborted) return onAbort()
    signal.addEventListener('abort', onAbort, { once: true })
    work.then(
      () => {
        signal.removeEventListener('abort', onAbort)
        if (signal.aborted) return
        resolve()
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort)
        if (signal.aborted) return
        if (rethrow) reject(err)
        else resolve()
      },
    )
  })
}
