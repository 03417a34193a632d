/** The REST proxy's options, their defaults and checks, and the interface of a running proxy. */
import type { Logger } from 'pino'
import type { Registry } from 'prom-client'
import type { ListenAddress } from './listen-address.js'
import type { RestClock } from './rest-clock.js'
import type { RestShare, RestShareGrant } from './share.js'

/** Defaults of the proxy's options. */
export const REST_PROXY_DEFAULTS = {
  listen: '127.0.0.1:0',
  upstream: 'https://discord.com/api',
  // below discord.js's own request timeout (15 s), so that the bot gets the proxy's answer, not a timeout and a blind retry
  maxHoldMs: 10_000,
  upstreamTimeoutMs: 10_000,
  maxQueued: 512,
  maxBodyBytes: 25 * 1024 * 1024,
  maxBufferedBytes: 128 * 1024 * 1024,
} as const

/** How a proxy is started; everything is optional. */
export interface RestProxyOptions {
  /** `HOST:PORT` or {host, port} (default 127.0.0.1:0: loopback, a free port). A host beyond loopback is logged as a warning. */
  readonly listen?: string | ListenAddress
  /** Discord's API base (default https://discord.com/api); plain http only on loopback. */
  readonly upstream?: string
  readonly logger?: Logger
  readonly clock?: RestClock
  /** The longest a request is held for lack of share or in Discord's buckets before the proxy answers it (ms, default 10000). */
  readonly maxHoldMs?: number
  /** The longest one try to Discord may take (ms, default 10000). */
  readonly upstreamTimeoutMs?: number
  /** Requests held or in flight at once; beyond, 429 at once (default 512). */
  readonly maxQueued?: number
  /** Largest request body (bytes, default 25 MiB); larger: 413. */
  readonly maxBodyBytes?: number
  /** Request bodies held at once (bytes, default 128 MiB); beyond, 429 at once. */
  readonly maxBufferedBytes?: number
}

/** What a REST client wanted and met, as the check-in reports it. */
export interface RestDemand {
  /**
   * Requests per second that wanted to go over the window asked for: those that arrived in it (held
   * back or not), and those still held from before it.
   */
  readonly perSecond: number
  /** Invalid responses from Discord in the last 10 minutes. */
  readonly invalid10m: number
}

/** A running proxy. */
export interface RestProxy {
  /** The base URL for the bot's REST client: `new REST({ api: proxy.url })`. */
  readonly url: string
  readonly address: ListenAddress
  /** Applies a share (null: none, the proxy sends nothing); a share runs out `validForMs` after it is given. */
  setShare(grant: RestShareGrant | null): void
  /** The share in force now, or null. */
  share(): RestShare | null
  /**
   * What the bot wanted over the last `windowMs` (1 s..10 min, at most since the start) and the invalid
   * count. Meant to be called once per check-in: the requests held at one call count again at the next.
   */
  demand(windowMs: number): RestDemand
  /** Adds pxe_rest_share_per_second and pxe_rest_requests_total to a registry (the agent's). */
  registerMetrics(registry: Registry): void
  /** Stops listening; held requests are answered 503. */
  close(): Promise<void>
}

/** The limits in force, checked. */
export interface ProxyLimits {
  readonly maxHoldMs: number
  readonly upstreamTimeoutMs: number
  readonly maxQueued: number
  readonly maxBodyBytes: number
  readonly maxBufferedBytes: number
}

function checkInt(name: string, value: number, min: number): number {
  if (!Number.isInteger(value) || value < min) throw new RangeError(`${name} must be an integer >= ${min} (got ${String(value)})`)
  return value
}

/** The options' limits with the defaults filled in; throws RangeError naming a bad one. */
export function proxyLimits(opts: RestProxyOptions): ProxyLimits {
  return {
    maxHoldMs: checkInt('maxHoldMs', opts.maxHoldMs ?? REST_PROXY_DEFAULTS.maxHoldMs, 1),
    upstreamTimeoutMs: checkInt('upstreamTimeoutMs', opts.upstreamTimeoutMs ?? REST_PROXY_DEFAULTS.upstreamTimeoutMs, 1),
    maxQueued: checkInt('maxQueued', opts.maxQueued ?? REST_PROXY_DEFAULTS.maxQueued, 1),
    maxBodyBytes: checkInt('maxBodyBytes', opts.maxBodyBytes ?? REST_PROXY_DEFAULTS.maxBodyBytes, 0),
    maxBufferedBytes: checkInt('maxBufferedBytes', opts.maxBufferedBytes ?? REST_PROXY_DEFAULTS.maxBufferedBytes, 0),
  }
}
