/**
 * A "bot" for the REST-budget scenario: one @discordjs/rest client (its own options, the whole 50/s in its
 * own eyes) that wants `perSecond` requests a second, open loop: arrivals follow the clock whatever the
 * answers do, spread over many channel IDs so that per-route buckets (per channel) never hold it back.
 * In-flight requests are bounded (a real bot's memory is too): an arrival that finds the bound reached is
 * not even queued and counts as unmet demand. Every network answer the client meets is counted through
 * its `makeRequest` (so retries after a 429 count too).
 */
import { setMaxListeners } from 'node:events'
import { DefaultRestOptions, REST, type RESTOptions, type ResponseLike } from '@discordjs/rest'

/** What one bot did. */
export interface BotCounts {
  /** Arrivals (what the bot wanted). */
  wanted: number
  /** Arrivals that found the in-flight bound reached: never queued. */
  unmet: number
  /** Requests handed to the REST client. */
  issued: number
  /** Of those: answered 2xx in the end. */
  ok: number
  /** Of those: failed in the end (a 4xx the client gave up on, a timeout, a connection error). */
  failed: number
  /** Every HTTP answer the client met, by status (retries included). */
  readonly statuses: Record<string, number>
  /** 429s with `X-RateLimit-Global` among them. */
  global429: number
  /** Invalid answers (401, 403, 429 other than scope `shared`: Discord's count). */
  invalid: number
  /** Completion times (performance.now() ms) of the requests answered 2xx, for rates over periods. */
  readonly okAt: number[]
  /** Failure messages, the first few. */
  readonly errors: string[]
}

/** How a bot is built. */
export interface LoadBotOptions {
  readonly name: string
  /** The REST client's `api` (e.g. `http://127.0.0.1:PORT/api`). */
  readonly api: string
  readonly token: string
  /** Requests wanted per second. */
  readonly perSecond: number
  /** How many distinct channel IDs the requests spread over. */
  readonly channels?: number
  /**
   * The in-flight bound (default: IN_FLIGHT_SECONDS of demand, at least 10). Such a bot asks its proxy no
   * faster than it is served once the bound is reached: the proxy's demand must see it still wanting more
   * (it counts the requests it holds again in each window).
   */
  readonly maxInFlight?: number
  /** Options of the REST client beyond `api` (default: none, as a bot that believes it has the whole budget). */
  readonly rest?: Partial<RESTOptions>
}

const TICK_MS = 10
/**
 * The default in-flight bound in seconds of demand: what the bot waits for is served within the proxy's
 * longest hold (10 s) at a share of at least a fifth of its demand, so the proxy need not answer it 429 itself.
 */
export const IN_FLIGHT_SECONDS = 2

/** The in-flight bound of a bot wanting `perSecond`: `seconds` of its demand, at least 10. */
export function inFlightBound(perSecond: number, seconds: number): number {
  return Math.max(10, Math.ceil(perSecond * seconds))
}
/** Channel IDs: snowflake-shaped, distinct per bot so that two bots never share a route bucket. */
const CHANNEL_BASE = 900_000_000_000_000_000n

/** One open-loop REST load. */
export class LoadBot {
  readonly counts: BotCounts = { wanted: 0, unmet: 0, issued: 0, ok: 0, failed: 0, statuses: {}, global429: 0, invalid: 0, okAt: [], errors: [] }
  private readonly rest: REST
  private readonly maxInFlight: number
  private readonly channels: readonly string[]
  private readonly rate: number
  private inFlight = 0
  private stopped = false
  private timer: NodeJS.Timeout | null = null
  /** Arrivals due since `since` (the start) at the bot's rate. */
  private since = 0
  private arrivedSince = 0
  private next = 0
  private readonly pending = new Set<Promise<void>>()
  /** Aborts every request still queued or held when the bot stops (its machine goes away). */
  private readonly abort = new AbortController()

  constructor(private readonly opts: LoadBotOptions, botIndex = 0) {
    this.rate = opts.perSecond
    // Every request in flight listens on the one signal (hundreds at a time): not a leak.
    setMaxListeners(0, this.abort.signal)
    this.maxInFlight = opts.maxInFlight ?? inFlightBound(opts.perSecond, IN_FLIGHT_SECONDS)
    const count = opts.channels ?? 1000
    const base = CHANNEL_BASE + BigInt(botIndex) * 1_000_000n
    this.channels = Array.from({ length: count }, (_, i) => String(base + BigInt(i)))
    const counts = this.counts
    this.rest = new REST({
      ...opts.rest,
      api: opts.api,
      // Counts every answer on the wire, retries included, before the client acts on it.
      makeRequest: async (url: string, init: Parameters<RESTOptions['makeRequest']>[1]): Promise<ResponseLike> => {
        // After stop() nothing goes out, and a plain error is one the client does not retry.
        if (this.stopped) throw new Error('the bot has stopped')
        const res = await DefaultRestOptions.makeRequest(url, init)
        counts.statuses[res.status] = (counts.statuses[res.status] ?? 0) + 1
        if (res.status === 429 && res.headers.get('x-ratelimit-global') !== null) counts.global429 += 1
        const shared = res.headers.get('x-ratelimit-scope') === 'shared'
        if (res.status === 401 || res.status === 403 || (res.status === 429 && !shared)) counts.invalid += 1
        return res
      },
    }).setToken(opts.token)
  }

  get name(): string {
    return this.opts.name
  }

  /** The demand now (requests per second). */
  get perSecond(): number {
    return this.rate
  }

  /** Starts the arrivals. */
  start(): void {
    if (this.timer !== null) return
    this.since = performance.now()
    this.timer = setInterval(() => this.tick(), TICK_MS)
  }

  /**
   * Stops the arrivals and gives up every request in flight, as a machine that goes away does: the
   * REST client sends none of them any more (a proxy that held one sees its connection close). Requests
   * given up are not counted as failed. `settled()` waits until the client has let go of them all.
   */
  stop(): void {
    if (this.timer !== null) clearInterval(this.timer)
    this.timer = null
    this.stopped = true
    this.abort.abort()
    // The requests given up still pass the client's own global limiter once each (50 a second: 20 s for
    // a thousand) before they fail without reaching the network; lift it so that they let go at once.
    ;(this.rest.options as { globalRequestsPerSecond: number }).globalRequestsPerSecond = Number.POSITIVE_INFINITY
    this.rest.clearHashSweeper()
    this.rest.clearHandlerSweeper()
  }

  /** Resolves once every request handed to the client has ended (after stop(): within a few seconds, the client's global waits are not abortable). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.pending])
  }

  private tick(): void {
    if (this.timer === null) return
    // Arrivals due by the clock, not by ticks: a late timer (a busy event loop) makes up for them at once.
    const due = Math.floor(((performance.now() - this.since) / 1000) * this.rate)
    while (this.arrivedSince < due) {
      this.arrivedSince += 1
      this.arrive()
    }
  }

  private arrive(): void {
    this.counts.wanted += 1
    if (this.inFlight >= this.maxInFlight) {
      this.counts.unmet += 1
      return
    }
    const channel = this.channels[this.next % this.channels.length]!
    this.next += 1
    this.inFlight += 1
    this.counts.issued += 1
    const done = this.rest
      .post(`/channels/${channel}/messages`, { body: { content: `load ${this.next}` }, signal: this.abort.signal })
      .then(
        () => {
          this.counts.ok += 1
          this.counts.okAt.push(performance.now())
        },
        (err: unknown) => {
          if (this.stopped) return // given up by stop()
          this.counts.failed += 1
          if (this.counts.errors.length < 5) this.counts.errors.push(err instanceof Error ? `${err.name}: ${err.message}`.slice(0, 200) : String(err))
        },
      )
      .finally(() => {
        this.inFlight -= 1
        this.pending.delete(done)
      })
    this.pending.add(done)
  }
}
