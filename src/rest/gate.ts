/**
 * The `makeRequest` of the proxy's @discordjs/rest clients: @discordjs/rest calls it for every HTTP
 * request it actually sends (first tries, retries after a 429 or a network error alike), so gating
 * here gates them all. Each waits for the pacer (the node's share), is refused once the invalid budget
 * is spent or its request was given up, goes to Discord with a timeout of its own, and its answer is
 * counted (invalid responses, 429s). @discordjs/rest's own global limit is set out of the way by the
 * proxy: it cannot follow a share that changes (a fixed one-second window of a whole number).
 */
import type { SharePacer } from './pacer.js'
import type { ProxyMetrics } from './proxy-metrics.js'
import type { RestClock } from './rest-clock.js'
import { isInvalidResponse } from './invalid-responses.js'
import type { SlidingCount } from './sliding-count.js'
import { shareInForce, type RestShare } from './share.js'

/** The header that ties an HTTP request of @discordjs/rest to the bot's request it serves (never sent upstream). */
export const REQUEST_ID_HEADER = 'x-pxe-proxy-request'

/** One request from the bot while the proxy holds it. */
export interface HeldRequest {
  readonly id: string
  /** Aborts the request's waits (in @discordjs/rest's bucket queue, in the pacer). */
  readonly controller: AbortController
  /** A try is on its way to Discord: its answer is awaited, not abandoned. */
  sending: boolean
  /** Held past its longest wait, or given up by the bot: no further try may go. */
  expired: boolean
}

/** Why the gate let a try not go. */
export class HeldBackError extends Error {
  override readonly name = 'HeldBackError'
  constructor(readonly kind: 'expired' | 'invalid_budget') {
    super(kind === 'expired' ? 'the request was held past its longest wait' : "the node's invalid-request budget is spent")
  }
}

/** What the gate reads and counts. */
export interface GateDeps {
  readonly clock: RestClock
  readonly pacer: SharePacer
  readonly invalid: SlidingCount
  readonly held: ReadonlyMap<string, HeldRequest>
  readonly metrics: ProxyMetrics
  readonly upstreamTimeoutMs: number
  /** The upstream HTTP client (global fetch). */
  readonly fetch: typeof fetch
}

/** True when the invalid budget of the share in force is spent. */
export function invalidBudgetSpent(share: RestShare | null, invalid: SlidingCount, now: number): boolean {
  return share !== null && invalid.count(now) >= share.invalidBudget
}

/** Builds the makeRequest function (undici's RequestInit in, a fetch Response out). */
export function gatedMakeRequest(deps: GateDeps): (url: string, init: Record<string, unknown>) => Promise<Response> {
  return async (url, init) => {
    const headers = { ...(init.headers as Record<string, string>) }
    const id = headers[REQUEST_ID_HEADER]
    delete headers[REQUEST_ID_HEADER]
    const held = id === undefined ? undefined : deps.held.get(id)
    if (held === undefined || held.expired) throw new HeldBackError('expired')
    const signal = init.signal as AbortSignal | undefined
    const spent = () => invalidBudgetSpent(shareInForce(deps.pacer.current(), deps.clock.now()), deps.invalid, deps.clock.now())
    if (spent()) throw new HeldBackError('invalid_budget')
    await deps.pacer.acquire(signal)
    // the budget may have been spent, or the request given up, while it waited
    if (held.expired) throw new HeldBackError('expired')
    if (spent()) throw new HeldBackError('invalid_budget')
    held.sending = true
    try {
      const timeout = AbortSignal.timeout(deps.upstreamTimeoutMs)
      const response = await deps.fetch(url, { ...init, headers, signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]) } as RequestInit)
      const scope = response.headers.get('x-ratelimit-scope')
      if (isInvalidResponse(response.status, scope)) deps.invalid.add(deps.clock.now())
      if (response.status === 429) deps.metrics.count('upstream_429')
      return response
    } finally {
      held.sending = false
    }
  }
}
