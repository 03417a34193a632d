/**
 * Runs the host's shard callbacks: at most one start or stop at a time per shard (a stop waits for a
 * start still in progress), and a record of what runs. A stop that fails leaves the shard counted as
 * running, so that it is retried and its generation is not reported as applied.
 */

/** What a start callback learns about the shard it must run. */
export interface ShardContext {
  readonly nodeId: string
  readonly shardId: number
  /** The plan generation that assigned the shard. */
  readonly generation: number
  readonly totalShards: number
  readonly maxConcurrency: number
}

/** Why the agent stops a shard. */
export type StopReason = 'plan' | 'lease_expiring' | 'certificate_refused' | 'shutdown'

/** What a stop callback learns. */
export interface ShardStopContext extends ShardContext {
  readonly reason: StopReason
}

/** The host's integration point with its gateway client; both may be async and may throw. */
export interface ShardCallbacks {
  /** Start the shard (the Identify claim was granted); resolve once it is started. */
  onStart(ctx: ShardContext): void | Promise<void>
  /** Stop the shard; resolve only once it no longer runs. */
  onStop(ctx: ShardStopContext): void | Promise<void>
}

/** Where a shard stands. `failed` means its start failed and nothing runs. */
export type ShardPhase = 'starting' | 'running' | 'stopping' | 'failed'

interface Entry {
  phase: ShardPhase
  ctx: ShardContext
  op: Promise<void>
  failedAt: number
}

/** Reports from the runner to the agent. */
export interface ShardRunnerHooks {
  started(ctx: ShardContext): void
  startFailed(ctx: ShardContext, err: unknown): void
  stopped(ctx: ShardStopContext): void
  stopFailed(ctx: ShardStopContext, err: unknown): void
}

/** Serializes the callbacks per shard and tracks phases. */
export class ShardRunner {
  private readonly entries = new Map<number, Entry>()

  constructor(private readonly callbacks: ShardCallbacks, private readonly hooks: ShardRunnerHooks, private readonly now: () => number) {}

  /** Starts a shard unless the runner already holds it in any phase. */
  start(ctx: ShardContext): void {
    if (this.entries.has(ctx.shardId)) return
    const entry: Entry = { phase: 'starting', ctx, op: Promise.resolve(), failedAt: 0 }
    this.entries.set(ctx.shardId, entry)
    entry.op = (async () => {
      try {
        await this.callbacks.onStart(ctx)
        entry.phase = 'running'
        this.hooks.started(ctx)
      } catch (err) {
        entry.phase = 'failed'
        entry.failedAt = this.now()
        this.hooks.startFailed(ctx, err)
      }
    })()
  }

  /** Stops a shard (after any start in progress); true once nothing of it runs. */
  stop(shardId: number, reason: StopReason): Promise<boolean> {
    const entry = this.entries.get(shardId)
    if (entry === undefined) return Promise.resolve(true)
    const result = entry.op.then(async () => {
      if (this.entries.get(shardId) !== entry) return true // an earlier stop in the chain finished it
      if (entry.phase === 'failed') {
        this.entries.delete(shardId)
        return true
      }
      entry.phase = 'stopping'
      const ctx: ShardStopContext = { ...entry.ctx, reason }
      try {
        await this.callbacks.onStop(ctx)
      } catch (err) {
        entry.phase = 'running' // it may still run: keep it, so that the stop is retried
        this.hooks.stopFailed(ctx, err)
        return false
      }
      this.entries.delete(shardId)
      this.hooks.stopped(ctx)
      return true
    })
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

  /** Drops failed shards whose failure is older than `ms`, so that they are claimed again. */
  forgetFailuresOlderThan(ms: number): void {
    const now = this.now()
    for (const [id, entry] of this.entries) if (entry.phase === 'failed' && now - entry.failedAt >= ms) this.entries.delete(id)
  }
}
