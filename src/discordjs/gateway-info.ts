/**
 * `GET /gateway/bot` once for all of a node's shards. Every shard has a WebSocketManager of its own,
 * and each would otherwise ask Discord's REST API before connecting: a node starting 16 shards would
 * ask 16 times, and a slow or rate-limited answer would sit between a shard's Identify grant and its
 * IDENTIFY. The answer is kept for a while (its session_start_limit is only advisory here: the
 * controller's daily budget is the guard).
 */
import type { WebSocketManager } from '@discordjs/ws'

/** What GET /gateway/bot answers, as @discordjs/ws types it. */
export type GatewayBotInfo = Awaited<ReturnType<WebSocketManager['fetchGatewayInformation']>>

export class SharedGatewayInfo {
  private cached: { readonly data: GatewayBotInfo; readonly until: number } | null = null
  private inflight: Promise<GatewayBotInfo> | null = null

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The kept answer, or `fetch`'s (one fetch at a time; a failed one is not kept). */
  get(fetch: () => Promise<GatewayBotInfo>, force = false): Promise<GatewayBotInfo> {
    if (!force && this.cached !== null && this.now() < this.cached.until) return Promise.resolve(this.cached.data)
    if (this.inflight !== null) return this.inflight
    const attempt = fetch().then(
      (data) => {
        this.cached = { data, until: this.now() + this.ttlMs }
        this.inflight = null
        return data
      },
      (err: unknown) => {
        this.inflight = null
        throw err
      },
    )
    this.inflight = attempt
    return attempt
  }

  /** Installs the shared answer as `manager`'s source of gateway information. */
  install(manager: WebSocketManager): void {
    const own = manager.fetchGatewayInformation.bind(manager)
    manager.fetchGatewayInformation = (force?: boolean) => this.get(() => own(true), force === true)
  }
}
