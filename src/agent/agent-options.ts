/** The options of a NodeAgent, their defaults, and the checks that refuse a bad value at construction. */
import type { Logger } from 'pino'
import type { AgentEvent } from './agent-events.js'
import type { AgentClock } from './clock.js'
import type { GenerationStore } from './generation-store.js'
import type { NodeIdentity } from './identity.js'
import type { RestProxyLink } from './rest-share.js'
import type { ShardCallbacks } from './shard-runner.js'
import { controllerUrlProblem } from '../net/controller-url.js'

export { controllerUrlProblem }

/** Shard counts a host may report for its check-ins instead of the agent's own view. */
export interface ShardHealth {
  readonly ready_shards: number
  readonly starting_shards: number
  readonly backoff_shards: number
  readonly fatal_shards: number
}

/** Everything a NodeAgent is made of; only identity, controllers, capacity and the callbacks are required. */
export interface NodeAgentOptions extends ShardCallbacks {
  /** From loadBundle() or identityFromPem(). */
  readonly identity: NodeIdentity
  /** Controller base URLs (https://host:port), tried in this order. */
  readonly controllers: readonly string[]
  /** Shards this node can run (1..128), declared in every check-in. */
  readonly capacity: number
  /** Every event, for the host's monitoring (called synchronously; must not throw). */
  readonly onEvent?: (event: AgentEvent) => void
  /** pino logger (default: none). */
  readonly logger?: Logger
  /** Clock, timers and randomness (default: the process's). */
  readonly clock?: AgentClock
  /** Last accepted generation across restarts (default: memory only). */
  readonly generationStore?: GenerationStore
  /** How far past `exp` a plan is still accepted (ms, default 5000). */
  readonly clockSkewMs?: number
  /** Shards have stopped at least this long before authority ends (ms; default lease/6, at most 5000). */
  readonly stopMarginMs?: number
  /**
   * The longest one stop may take (ms; default lease/6, at most 30000). A stop still running then is
   * abandoned (its signal aborts; the CLI kills the stop command's process group), the shard counts as
   * possibly running and the stop is retried. The fail-safe begins stop timeout + margin before the
   * node's authority ends; a controller lease shorter than twice that halts the agent, starting nothing.
   */
  readonly stopTimeoutMs?: number
  /** Limit of one request attempt to one controller (ms, default 10000). */
  readonly requestTimeoutMs?: number
  /** Wait after a grant before claiming the next shard of that bucket (ms, default 5100). */
  readonly identifyIntervalMs?: number
  /** How often one handoff-waiting bucket is probed (ms, default 1000). */
  readonly handoffPollMs?: number
  /** The agent's own request pace (default 3 a second, burst 8). */
  readonly requestBudget?: { readonly perSecond: number; readonly burst: number }
  /** A shard whose start failed is claimed again after this (ms, default 60000). */
  readonly startRetryMs?: number
  /** Overrides the shard counts sent in check-ins (default: derived from the agent's own state). */
  readonly health?: () => ShardHealth
  /**
   * Renew the certificate at two thirds of its lifetime (POST /v1/renew; default true). The signer on the
   * CA host renews only node certificates it issued.
   */
  readonly renewCertificate?: boolean
  /**
   * Where in the certificate's lifetime it is renewed (0.1..0.9, default 2/3; ±5 % of the lifetime of
   * jitter around it). Lower it for very short-lived certificates, to leave more room for retries.
   */
  readonly renewAtFraction?: number
  /** Called with each renewed identity once new connections use it (e.g. to keep it on disk); must not throw. */
  readonly onIdentityRenewed?: (identity: NodeIdentity) => void | Promise<void>
  /**
   * A REST proxy (startRestProxy(); docs/rest-budget.md) to give this node's REST share to: the share of
   * each verified plan, none once it runs out or authority is lost, none after leave() or stop(). Each
   * check-in then reports the proxy's demand (`rest_demand`), and the agent's registry carries its
   * metrics. The host starts and closes the proxy.
   */
  readonly restProxy?: RestProxyLink
}

/** Defaults of the optional numeric options. */
export const AGENT_DEFAULTS = {
  clockSkewMs: 5000,
  maxStopMarginMs: 5000,
  maxStopTimeoutMs: 30_000,
  requestTimeoutMs: 10_000,
  identifyIntervalMs: 5100,
  handoffPollMs: 1000,
  startRetryMs: 60_000,
} as const

/** The default stop margin for a lease (ms): lease/6, at most 5 s. */
export function defaultStopMarginMs(leaseMs: number): number {
  return Math.min(AGENT_DEFAULTS.maxStopMarginMs, Math.floor(leaseMs / 6))
}

/**
 * The default stop timeout for a lease (ms): lease/6, at most 30 s. With the default margin the
 * fail-safe then begins a third of the lease before authority ends: after two check-in intervals
 * (lease/3 each), so one missed check-in and its retries never stop a shard.
 */
export function defaultStopTimeoutMs(leaseMs: number): number {
  return Math.min(AGENT_DEFAULTS.maxStopTimeoutMs, Math.floor(leaseMs / 6))
}

function checkInt(name: string, value: number | undefined, min: number, max: number): void {
  if (value === undefined) return
  if (!Number.isInteger(value) || value < min || value > max) throw new RangeError(`${name} must be an integer in ${min}..${max} (got ${String(value)})`)
}

/** Throws a RangeError naming the first option out of range. */
export function assertValidOptions(o: NodeAgentOptions): void {
  checkInt('capacity', o.capacity, 1, 128)
  if (o.capacity === undefined) throw new RangeError('capacity is required')
  if (!Array.isArray(o.controllers) || o.controllers.length === 0) throw new RangeError('at least one controller URL is required')
  for (const url of o.controllers) {
    const problem = controllerUrlProblem(url)
    if (problem !== null) throw new RangeError(`controller URL ${JSON.stringify(url).slice(0, 80)} ${problem}`)
  }
  checkInt('clockSkewMs', o.clockSkewMs, 0, 300_000)
  checkInt('stopMarginMs', o.stopMarginMs, 0, 3_600_000)
  checkInt('stopTimeoutMs', o.stopTimeoutMs, 1, 3_600_000)
  checkInt('requestTimeoutMs', o.requestTimeoutMs, 100, 600_000)
  checkInt('identifyIntervalMs', o.identifyIntervalMs, 0, 600_000)
  checkInt('handoffPollMs', o.handoffPollMs, 50, 600_000)
  checkInt('startRetryMs', o.startRetryMs, 0, 86_400_000)
  if (o.renewAtFraction !== undefined && !(o.renewAtFraction >= 0.1 && o.renewAtFraction <= 0.9)) throw new RangeError(`renewAtFraction must be in 0.1..0.9 (got ${String(o.renewAtFraction)})`)
  if (typeof o.onStart !== 'function' || typeof o.onStop !== 'function') throw new RangeError('onStart and onStop callbacks are required')
}
