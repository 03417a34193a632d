/**
 * The proxy's metrics (docs/rest-budget.md "Metrics"), made without a registry: the agent registers them
 * on its own (pxe-node serves them with the agent's), a library host on whichever it likes.
 */
import { Counter, Gauge, type Registry } from 'prom-client'

/**
 * `result` of pxe_rest_requests_total. Each request from the bot counts once by how it ended: `sent`
 * (forwarded, Discord's answer returned), `held_expired` (held past the longest wait: answered 429, or
 * 503 without a share), `refused_no_auth`, `refused_invalid_budget`, `refused_queue_full`,
 * `refused_bad_request` (not a Discord API request, or a body too large), `upstream_error` (no answer
 * from Discord), `client_gone` (the bot hung up first). `upstream_429` counts each 429 Discord answered
 * (the proxy waits its Retry-After and sends again, within the share).
 */
export const REQUEST_RESULTS = ['sent', 'held_expired', 'refused_no_auth', 'refused_invalid_budget', 'refused_queue_full', 'refused_bad_request', 'upstream_error', 'client_gone', 'upstream_429'] as const

/** One value of the `result` label. */
export type RequestResult = (typeof REQUEST_RESULTS)[number]

/** The proxy's two metrics. */
export class ProxyMetrics {
  private readonly requests: Counter<'result'>
  private readonly share: Gauge

  /** `shareNow`: the requests per second the proxy may send now (0 without a share in force), read at scrape time. */
  constructor(shareNow: () => number) {
    this.requests = new Counter({ name: 'pxe_rest_requests_total', help: 'Requests from the bot to the REST proxy, by how they ended; upstream_429 counts 429 answers from Discord.', labelNames: ['result'], registers: [] })
    for (const result of REQUEST_RESULTS) this.requests.inc({ result }, 0)
    this.share = new Gauge({
      name: 'pxe_rest_share_per_second',
      help: "The node's REST share in force: requests per second the proxy may send to Discord (0: none, or it ran out).",
      registers: [],
      collect() {
        this.set(shareNow())
      },
    })
  }

  count(result: RequestResult): void {
    this.requests.inc({ result })
  }

  /** Adds both metrics to `registry`. */
  registerOn(registry: Registry): void {
    registry.registerMetric(this.requests)
    registry.registerMetric(this.share)
  }
}
