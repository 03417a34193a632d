/**
 * The discord.js adapter (SPEC "The discord.js adapter"): runs a node's shards with @discordjs/ws under
 * the controller's grants and sessions. `onStart` / `onStop` are NodeAgent's callbacks:
 *
 *   const shards = new DiscordjsShards({ token, intents, wsOptions: { rest }, onDispatch })
 *   new NodeAgent({ ..., onStart: (c) => shards.onStart(c), onStop: (c) => shards.onStop(c) })
 *
 * Every IDENTIFY waits for a controller grant: the first of a start uses the grant the agent claimed for
 * it, every later one (after INVALID_SESSION, a refused RESUME, a reconnect that cannot resume) claims one
 * more through the start context. A handed-over session RESUMEs with no grant. A stop by plan or by a
 * leave closes resumably and returns the session with the last sequence delivered; any other stop closes
 * with 1000.
 */
import type { ShardContext, ShardStopContext, StopResult } from '../agent/index.js'
import { SharedGatewayInfo } from './gateway-info.js'
import { ShardConnection, type DispatchPayload, type PassThroughOptions } from './shard-connection.js'

export type { DispatchPayload, PassThroughOptions } from './shard-connection.js'

export interface DiscordjsShardsOptions {
  /** The bot token (never logged by the adapter). */
  readonly token: string
  /** Gateway intents (a bit field). */
  readonly intents: number
  /**
   * Passed to every WebSocketManager: `rest` (required: the source of `GET /gateway/bot`), compression,
   * timeouts, identify properties, presence, ... The adapter sets the token, intents, shard count and
   * IDs, the session store and the identify throttler itself.
   */
  readonly wsOptions: PassThroughOptions
  /** Every gateway dispatch of every shard this node runs, READY and RESUMED included, in order. */
  readonly onDispatch: (shardId: number, payload: DispatchPayload) => void
  /** @discordjs/ws's debug lines, per shard (default: dropped). */
  readonly onDebug?: (shardId: number, message: string) => void
  /**
   * The grant a start comes with pays for its first IDENTIFY only if that IDENTIFY goes out within this
   * many ms of the moment the agent sent the claim (default 500); later, a fresh grant is claimed first.
   * Set it to at most the controller's `identify_interval_ms` − 5000: the controller spaces a bucket's
   * grants that far apart, Discord counts 5 s between the IDENTIFYs it receives.
   */
  readonly maxGrantAgeMs?: number
  /** How long GET /gateway/bot's answer is shared by the node's shards (ms, default 30000). */
  readonly gatewayInfoTtlMs?: number
}

/** Defaults of the optional numbers. */
export const DISCORDJS_DEFAULTS = { maxGrantAgeMs: 500, gatewayInfoTtlMs: 30_000 } as const

export class DiscordjsShards {
  /** By shard count and number: during a live reshard one number runs under two counts. */
  private readonly running = new Map<string, ShardConnection>()
  private readonly gateway: SharedGatewayInfo

  constructor(private readonly options: DiscordjsShardsOptions) {
    if (typeof options.token !== 'string' || options.token.length === 0) throw new TypeError('DiscordjsShards: token must be a non-empty string')
    if (!Number.isSafeInteger(options.intents) || options.intents < 0) throw new TypeError('DiscordjsShards: intents must be a non-negative integer')
    if (typeof options.onDispatch !== 'function') throw new TypeError('DiscordjsShards: onDispatch must be a function')
    for (const key of ['maxGrantAgeMs', 'gatewayInfoTtlMs'] as const) {
      const value = options[key]
      if (value !== undefined && (!Number.isSafeInteger(value) || value < 0)) throw new TypeError(`DiscordjsShards: ${key} must be a non-negative integer (ms)`)
    }
    this.gateway = new SharedGatewayInfo(options.gatewayInfoTtlMs ?? DISCORDJS_DEFAULTS.gatewayInfoTtlMs)
  }

  /** The shards running now (connected, or connecting under a start or a reconnect). */
  get shardIds(): number[] {
    return [...new Set([...this.running.values()].map((c) => c.shardId))].sort((a, b) => a - b)
  }

  /** NodeAgent's onStart: connects the shard; resolves once it is READY or RESUMED. */
  async onStart(ctx: ShardContext): Promise<void> {
    const key = `${ctx.totalShards}/${ctx.shardId}`
    if (this.running.has(key)) throw new Error(`shard ${ctx.shardId} of ${ctx.totalShards} is already running on this node`)
    const { token, intents, wsOptions, onDebug } = this.options
    // A live reshard's next set identifies beside the current one; its events reach the bot only once its
    // shard count is the bot's (the switch), and an old-set shard's stop no longer after it: until then the
    // current set delivers every guild's events, and the two sessions of one guild never both deliver.
    const onDispatch = (shardId: number, payload: DispatchPayload) => {
      if (ctx.serving()) this.options.onDispatch(shardId, payload)
    }
    const connection = new ShardConnection({
      shardId: ctx.shardId,
      totalShards: ctx.totalShards,
      token,
      intents,
      wsOptions,
      resume: ctx.resume,
      claimIdentify: (signal) => ctx.claimFreshIdentify({ signal }),
      onDispatch,
      ...(onDebug === undefined ? {} : { onDebug }),
      gateway: this.gateway,
      maxGrantAgeMs: this.options.maxGrantAgeMs ?? DISCORDJS_DEFAULTS.maxGrantAgeMs,
      grantAgeMs: () => ctx.identifyGrantAgeMs(),
    })
    this.running.set(key, connection)
    try {
      await connection.start(ctx.signal)
    } catch (err) {
      this.running.delete(key)
      throw err
    }
  }

  /**
   * NodeAgent's onStop: a stop by plan (`reason: "plan"`) or a leave (`"leave"`: agent.leave()) closes with
   * 4200 and resolves to the session for the new owner; any other closes with 1000 (Discord ends the session). Resolves once the socket is
   * closed; from the call on, no event of the shard reaches onDispatch.
   */
  async onStop(ctx: ShardStopContext): Promise<StopResult> {
    const key = `${ctx.totalShards}/${ctx.shardId}`
    const connection = this.running.get(key)
    if (connection === undefined) return undefined
    this.running.delete(key)
    // A plan move and a leave hand the session to the shard's next owner; any other stop ends it.
    const session = await connection.stop(ctx.reason === 'plan' || ctx.reason === 'leave')
    return session ?? undefined
  }
}
