/**
 * What a test can set on the gateway emulator, and the defaults. Discord's own values are noted where
 * the defaults differ: a test wants short heartbeats and resume windows, not 41 s and "a few minutes".
 */
import { PRIVILEGED_INTENTS } from './gateway-codes.js'
import { resolveRestOptions, type ResolvedRestOptions, type RestEmulatorOptions } from './rest-options.js'

/** Options for `startGatewayEmulator`. Every field is optional. */
export interface GatewayEmulatorOptions {
  /** The bot token IDENTIFY, RESUME and GET /gateway/bot must carry (default `emulator-token`). */
  readonly token?: string
  /** GET /gateway/bot's `shards`, the recommended shard count (default 1). */
  readonly shardCount?: number
  /** `session_start_limit.max_concurrency`: IDENTIFY buckets are `shard_id % maxConcurrency` (default 1). */
  readonly maxConcurrency?: number
  /** `session_start_limit` (defaults: total 1000, remaining = total, resetAfter 86,400,000 ms). */
  readonly sessionStartLimit?: { readonly total?: number; readonly remaining?: number; readonly resetAfter?: number }
  /** At most one IDENTIFY per bucket per this many ms, across all connections (default 5000, Discord's). */
  readonly identifyWindowMs?: number
  /** How many guilds the bot is in (default 10). Their IDs spread evenly over every shard count. */
  readonly guildCount?: number
  /** A session whose shard would hold more guilds than this is refused with 4011 (default 2500, Discord's). */
  readonly guildsPerShardLimit?: number
  /** Large-bot sharding: `num_shards` must be a multiple of this, else 4010 (default 1). */
  readonly shardCountMultiple?: number
  /** Numbered test events each live (or resumable) session produces per second (default 5; 0 = only `produce`). */
  readonly eventsPerSecond?: number
  /** The dispatch name `t` of the numbered test events (default `PXE_TEST_EVENT`). */
  readonly eventType?: string
  /** Whether READY is followed by one GUILD_CREATE per guild of the shard (default true). */
  readonly sendGuildCreates?: boolean
  /** How long a disconnected session stays resumable (default 60,000 ms; Discord: "a few minutes"). */
  readonly resumeWindowMs?: number
  /** HELLO's heartbeat_interval (default 1000 ms; Discord sends about 41,250). */
  readonly heartbeatIntervalMs?: number
  /**
   * How late a heartbeat may be before the connection counts as dead: the deadline is
   * `heartbeatIntervalMs + heartbeatGraceMs` after HELLO or the previous heartbeat (default
   * max(1500, heartbeatIntervalMs)). Discord's tolerance is undocumented ("there is already tolerance").
   */
  readonly heartbeatGraceMs?: number
  /** Privileged intents the application may use; others close with 4014 (default all three). */
  readonly allowedPrivilegedIntents?: number
  /** Gateway send rate limit per connection (default 120 per 60,000 ms, Discord's); over it closes with 4008. */
  readonly sendLimit?: { readonly count: number; readonly windowMs: number }
  /** The REST side's limits under /api/v10 (defaults: Discord's; see rest-options.ts). */
  readonly rest?: RestEmulatorOptions
}

/** The options with every default filled in. */
export interface ResolvedOptions {
  readonly token: string
  readonly shardCount: number
  readonly maxConcurrency: number
  readonly sessionStartLimit: { readonly total: number; readonly remaining: number; readonly resetAfter: number }
  readonly identifyWindowMs: number
  readonly guildCount: number
  readonly guildsPerShardLimit: number
  readonly shardCountMultiple: number
  readonly eventsPerSecond: number
  readonly eventType: string
  readonly sendGuildCreates: boolean
  readonly resumeWindowMs: number
  readonly heartbeatIntervalMs: number
  readonly heartbeatGraceMs: number
  readonly allowedPrivilegedIntents: number
  readonly sendLimit: { readonly count: number; readonly windowMs: number }
  readonly rest: ResolvedRestOptions
}

function positiveInt(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`gateway emulator: ${name} must be a positive integer`)
  return value
}

function nonNegative(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`gateway emulator: ${name} must be >= 0`)
  return value
}

/** Fills in defaults and refuses values that would make the emulator meaningless. */
export function resolveOptions(options: GatewayEmulatorOptions = {}): ResolvedOptions {
  const total = options.sessionStartLimit?.total ?? 1000
  const heartbeatIntervalMs = positiveInt('heartbeatIntervalMs', options.heartbeatIntervalMs ?? 1000)
  return {
    token: options.token ?? 'emulator-token',
    shardCount: positiveInt('shardCount', options.shardCount ?? 1),
    maxConcurrency: positiveInt('maxConcurrency', options.maxConcurrency ?? 1),
    sessionStartLimit: {
      total,
      remaining: nonNegative('sessionStartLimit.remaining', options.sessionStartLimit?.remaining ?? total),
      resetAfter: nonNegative('sessionStartLimit.resetAfter', options.sessionStartLimit?.resetAfter ?? 86_400_000),
    },
    identifyWindowMs: nonNegative('identifyWindowMs', options.identifyWindowMs ?? 5000),
    guildCount: nonNegative('guildCount', options.guildCount ?? 10),
    guildsPerShardLimit: positiveInt('guildsPerShardLimit', options.guildsPerShardLimit ?? 2500),
    shardCountMultiple: positiveInt('shardCountMultiple', options.shardCountMultiple ?? 1),
    eventsPerSecond: nonNegative('eventsPerSecond', options.eventsPerSecond ?? 5),
    eventType: options.eventType ?? 'PXE_TEST_EVENT',
    sendGuildCreates: options.sendGuildCreates ?? true,
    resumeWindowMs: nonNegative('resumeWindowMs', options.resumeWindowMs ?? 60_000),
    heartbeatIntervalMs,
    heartbeatGraceMs: nonNegative('heartbeatGraceMs', options.heartbeatGraceMs ?? Math.max(1500, heartbeatIntervalMs)),
    allowedPrivilegedIntents: options.allowedPrivilegedIntents ?? PRIVILEGED_INTENTS,
    sendLimit: options.sendLimit ?? { count: 120, windowMs: 60_000 },
    rest: resolveRestOptions(options.rest),
  }
}
