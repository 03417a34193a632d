/**
 * The REST side's options (`startGatewayEmulator({ rest: {...} })`) and their defaults, which are
 * Discord's own (developers/topics/rate-limits.mdx): 50 requests per second per bot, and an IP
 * address banned after 10,000 invalid requests (401, 403, 429) in 10 minutes. The ban's length is
 * not in the docs; an hour is what banned bots report (and what the product's SPEC assumes).
 */
import { REST_ROUTES, type RestRouteName } from './rest-routes.js'

/** A per-route bucket: `limit` requests per `windowMs`, counted from the first request of a window. */
export interface BucketLimit {
  readonly limit: number
  readonly windowMs: number
}

/** REST options. Every field is optional. */
export interface RestEmulatorOptions {
  /** Requests per second a bot (token) may make across every route (default 50, Discord's). */
  readonly globalPerSecond?: number
  /** Invalid answers (401, 403, 429 other than scope `shared`) a client may meet in `invalidWindowMs` (default 10,000). */
  readonly invalidLimit?: number
  /** The sliding window over which invalid answers are counted (default 600,000 ms: 10 minutes). */
  readonly invalidWindowMs?: number
  /** How long a client that reached `invalidLimit` is refused (default 3,600,000 ms: one hour). */
  readonly banMs?: number
  /**
   * The request header that names a client for invalid counting and bans, for tests whose clients all
   * share 127.0.0.1 (default `x-emulator-client`). A request without it is counted under its IP
   * address (`req.socket.remoteAddress`), as Discord does; null counts every request by IP address.
   */
  readonly clientHeader?: string | null
  /** Overrides of the route table's bucket limits, by route name (see rest-routes.ts). */
  readonly routeLimits?: Partial<Record<RestRouteName, BucketLimit>>
  /** Channel IDs the bot may not see: their routes answer 403 Missing Access (an invalid request). */
  readonly forbiddenChannelIds?: readonly string[]
  /**
   * Channel IDs whose resource is rate limited for everyone: their routes answer 429 with
   * `X-RateLimit-Scope: shared` and Retry-After 1, which Discord does not count as invalid.
   */
  readonly sharedLimitedChannelIds?: readonly string[]
}

/** The REST options with every default filled in. */
export interface ResolvedRestOptions {
  readonly globalPerSecond: number
  readonly invalidLimit: number
  readonly invalidWindowMs: number
  readonly banMs: number
  readonly clientHeader: string | null
  readonly routeLimits: Partial<Record<RestRouteName, BucketLimit>>
  readonly forbiddenChannelIds: ReadonlySet<string>
  readonly sharedLimitedChannelIds: ReadonlySet<string>
}

function positiveInt(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`gateway emulator: rest.${name} must be a positive integer`)
  return value
}

function checkedLimits(limits: Partial<Record<string, BucketLimit>>): Partial<Record<RestRouteName, BucketLimit>> {
  for (const [name, limit] of Object.entries(limits)) {
    if (!REST_ROUTES.some((r) => r.name === name && r.bucket)) throw new RangeError(`gateway emulator: rest.routeLimits names ${name}, not a route with a bucket`)
    positiveInt(`routeLimits.${name}.limit`, limit?.limit ?? 0)
    positiveInt(`routeLimits.${name}.windowMs`, limit?.windowMs ?? 0)
  }
  return { ...limits }
}

/** Fills in defaults and refuses values that would make the limits meaningless. */
export function resolveRestOptions(options: RestEmulatorOptions = {}): ResolvedRestOptions {
  const clientHeader = options.clientHeader === undefined ? 'x-emulator-client' : options.clientHeader
  return {
    globalPerSecond: positiveInt('globalPerSecond', options.globalPerSecond ?? 50),
    invalidLimit: positiveInt('invalidLimit', options.invalidLimit ?? 10_000),
    invalidWindowMs: positiveInt('invalidWindowMs', options.invalidWindowMs ?? 600_000),
    banMs: positiveInt('banMs', options.banMs ?? 3_600_000),
    // Node lower-cases incoming header names.
    clientHeader: clientHeader === null ? null : clientHeader.toLowerCase(),
    routeLimits: checkedLimits(options.routeLimits ?? {}),
    forbiddenChannelIds: new Set(options.forbiddenChannelIds ?? []),
    sharedLimitedChannelIds: new Set(options.sharedLimitedChannelIds ?? []),
  }
}
