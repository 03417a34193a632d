/**
 * The REST proxy (SPEC "REST budget"): a local HTTP server that a bot's REST client points at
 * (`new REST({ api: proxy.url })`). It forwards each request to Discord with the bot's own
 * Authorization header through @discordjs/rest, which keeps Discord's per-route buckets and honours
 * Retry-After, and sends nothing beyond the node's share (gate.ts). It answers by itself — never
 * forwarding — a request without Authorization (401), one that arrives once the invalid budget is spent
 * or the queue is full (429), and one held past its longest wait (429 with a share, 503 without). The
 * token is never logged.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomUUID } from 'node:crypto'
import { pino, type Logger } from 'pino'
import type { Registry } from 'prom-client'
import { hostForUrl } from '../net/host.js'
import { apiRouteOf, type ApiRoute } from './api-route.js'
import { loadDiscordRest, type DiscordRestModule } from './discord-rest-loader.js'
import { gatedMakeRequest, HeldBackError, invalidBudgetSpent, type HeldRequest } from './gate.js'
import { INVALID_WINDOW_MS } from './invalid-responses.js'
import { isRemoteListen, parseListenAddress, upstreamProblem, type ListenAddress } from './listen-address.js'

import { SharePacer } from './pacer.js'
import { ProxyMetrics, type RequestResult } from './proxy-metrics.js'
import { proxyLimits, REST_PROXY_DEFAULTS, type ProxyLimits, type RestDemand, type RestProxy, type RestProxyOptions } from './proxy-options.js'
import { answerHeaders, forwardedHeaders, readBody } from './forwarding.js'
import { sendRateLimited, sendRefusal } from './proxy-replies.js'
import { systemRestClock, type RestClock } from './rest-clock.js'
import { assertValidGrant, type RestShare, type RestShareGrant } from './share.js'
import { SlidingCount } from './sliding-count.js'

export { REST_PROXY_DEFAULTS }
export type { RestDemand, RestProxy, RestProxyOptions }

const SILENT = pino({ enabled: false })
const MAX_REPORTED_RATE = 100_000
const MAX_REPORTED_INVALID = 10_000_000

/** Starts a proxy: loads @discordjs/rest (RestProxyUnavailableError without it), then listens. */
export async function startRestProxy(opts: RestProxyOptions = {}): Promise<RestProxy> {
  const address = typeof opts.listen === 'object' ? opts.listen : parseListenAddress(opts.listen ?? REST_PROXY_DEFAULTS.listen)
  const upstream = (opts.upstream ?? REST_PROXY_DEFAULTS.upstream).replace(/\/+$/, '')
  const problem = upstreamProblem(upstream)
  if (problem !== null) throw new RangeError(`the REST upstream ${JSON.stringify(upstream.slice(0, 80))} ${problem}`)
  const mod = await loadDiscordRest()
  const proxy = new RestProxyServer(mod, address, upstream, opts)
  await proxy.listen()
  return proxy
}

class RestProxyServer implements RestProxy {
  readonly address: ListenAddress
  private readonly clock: RestClock
  private readonly logger: Logger
  private readonly pacer: SharePacer
  private readonly invalid = new SlidingCount(INVALID_WINDOW_MS)
  /** Arrivals in 100 ms buckets: a demand over a check-in window of seconds errs high by at most a tenth of a second of them. */
  private readonly arrivals = new SlidingCount(INVALID_WINDOW_MS, 100)
  private readonly held = new Map<string, HeldRequest>()
  private readonly metrics: ProxyMetrics
  private readonly clients = new Map<string, InstanceType<DiscordRestModule['REST']>>()
  private readonly server: http.Server
  private readonly startedAt: number
  private readonly limits: ProxyLimits
  private bufferedBytes = 0
  private closing = false
  private spentLogged = false
  private sharedBefore: boolean | null = null
  /** Requests held when demand() was last called: they still wanted to go during the next window. */
  private heldAtLastDemand = 0
  private readonly makeRequest: ReturnType<typeof gatedMakeRequest>

  constructor(private readonly mod: DiscordRestModule, address: ListenAddress, private readonly upstream: string, opts: RestProxyOptions) {
    this.address = address
    this.clock = opts.clock ?? systemRestClock
    // Nothing here logs a request's headers; the redaction guards any line that ever would.
    this.logger = (opts.logger ?? SILENT).child({ component: 'rest_proxy' }, { redact: { paths: ['authorization', '*.authorization', '*.headers.authorization', 'headers.authorization'], censor: '[redacted]' } })
    this.limits = proxyLimits(opts)
    this.pacer = new SharePacer(this.clock)
    this.metrics = new ProxyMetrics(() => this.pacer.current()?.perSecond ?? 0)
    this.startedAt = this.clock.now()
    this.makeRequest = gatedMakeRequest({ clock: this.clock, pacer: this.pacer, invalid: this.invalid, held: this.held, metrics: this.metrics, upstreamTimeoutMs: this.limits.upstreamTimeoutMs, fetch: globalThis.fetch })
    this.server = http.createServer({ headersTimeout: 10_000, requestTimeout: 120_000, keepAliveTimeout: 5_000 }, (req, res) => this.handle(req, res))
    // bounds the sockets a bot may hold open (each held request needs one; keep-alive ones idle)
    this.server.maxConnections = Math.max(1024, 4 * this.limits.maxQueued)
  }

  get url(): string {
    return `http://${hostForUrl(this.address.host)}:${this.address.port}/api`
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(this.address.port, this.address.host, () => {
        this.server.off('error', reject)
        resolve()
      })
    })
    const port = (this.server.address() as AddressInfo).port
    ;(this as { address: ListenAddress }).address = { host: this.address.host, port }
    this.logger.info({ url: this.url, upstream: this.upstream }, 'REST proxy listening')
    if (isRemoteListen(this.address)) this.logger.warn({ host: this.address.host }, 'the REST proxy listens beyond loopback: anyone who reaches it spends the bot\'s REST budget (with their own token)')
  }

  setShare(grant: RestShareGrant | null): void {
    if (grant !== null) assertValidGrant(grant)
    const share = grant === null ? null : { perSecond: grant.perSecond, invalidBudget: grant.invalidBudget, untilMs: this.clock.now() + grant.validForMs }
    const shared = share !== null && share.perSecond > 0
    if (shared !== this.sharedBefore) {
      if (shared) this.logger.info({ per_second: share.perSecond, invalid_budget: share.invalidBudget }, 'REST share in force: the proxy sends to Discord')
      else this.logger.warn('no REST share: the proxy holds every request and sends nothing')
      this.sharedBefore = shared
    }
    if (share !== null && !invalidBudgetSpent(share, this.invalid, this.clock.now())) this.spentLogged = false
    this.pacer.setShare(share)
  }

  share(): RestShare | null {
    return this.pacer.current()
  }

  demand(windowMs: number): RestDemand {
    const now = this.clock.now()
    const window = Math.min(Math.max(1000, windowMs), INVALID_WINDOW_MS, Math.max(1000, now - this.startedAt))
    // A bot that waits for each answer (a fixed number in flight) sends no faster than it is served: counting
    // arrivals alone, its demand would equal its share and never grow. The requests still held from the
    // previous window wanted to go in this one too, so they count again.
    const wanted = this.arrivals.count(now, window) + this.heldAtLastDemand
    this.heldAtLastDemand = this.held.size
    const perSecond = Math.min(MAX_REPORTED_RATE, Math.round((wanted / (window / 1000)) * 100) / 100)
    return { perSecond, invalid10m: Math.min(MAX_REPORTED_INVALID, this.invalid.count(now)) }
  }

  registerMetrics(registry: Registry): void {
    this.metrics.registerOn(registry)
  }

  async close(): Promise<void> {
    if (this.closing) return
    this.closing = true
    for (const held of this.held.values()) {
      held.expired = true
      held.controller.abort()
    }
    this.pacer.close()
    for (const client of this.clients.values()) {
      client.clearHashSweeper()
      client.clearHandlerSweeper()
    }
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve())
      this.server.closeIdleConnections()
    })
  }

  private count(result: RequestResult): void {
    this.metrics.count(result)
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const hasBody = req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0'
    if (this.closing) return sendRefusal(res, 503, 'closing', 'the REST proxy is closing', 1, true)
    const auth = req.headers.authorization
    if (typeof auth !== 'string' || auth.trim() === '') {
      this.count('refused_no_auth')
      return sendRefusal(res, 401, 'no_auth', "401: Unauthorized (the REST proxy forwards only requests with the bot's Authorization header)", undefined, hasBody)
    }
    const route = apiRouteOf(req.method, req.url)
    if ('status' in route) {
      this.count('refused_bad_request')
      return sendRefusal(res, route.status, route.status === 404 ? 'not_found' : 'method_not_allowed', route.message, undefined, hasBody)
    }
    const now = this.clock.now()
    this.arrivals.add(now) // demand: every request the bot wanted sent, held back or not
    const share = this.pacer.current()
    if (invalidBudgetSpent(share, this.invalid, now)) {
      this.count('refused_invalid_budget')
      if (!this.spentLogged) this.logger.warn({ invalid_budget: share!.invalidBudget }, "the node's invalid-request budget is spent: the proxy answers 429 itself until the 10-minute window frees some")
      this.spentLogged = true
      return sendRateLimited(res, 'invalid_budget', "The node's invalid-request budget (401, 403, 429 in 10 minutes) is spent; nothing is sent to Discord until the window frees some.", this.invalid.msUntilBelow(share!.invalidBudget, now) / 1000, hasBody)
    }
    if (this.held.size >= this.limits.maxQueued || this.bufferedBytes >= this.limits.maxBufferedBytes) {
      this.count('refused_queue_full')
      return sendRateLimited(res, 'queue_full', 'The REST proxy holds as many requests as it may; try again shortly.', 1, hasBody)
    }
    const held: HeldRequest = { id: randomUUID(), controller: new AbortController(), sending: false, expired: false }
    this.held.set(held.id, held)
    void this.forward(req, res, route, held, now)
  }

  /** Reads the body, queues the request on @discordjs/rest and answers the bot: Discord's answer, or the proxy's when held too long. */
  private async forward(req: IncomingMessage, res: ServerResponse, route: ApiRoute, held: HeldRequest, arrivedAt: number): Promise<void> {
    let answered = false
    const answer = (write: () => void) => {
      if (answered) return false
      answered = true
      write()
      return true
    }
    let bodyBytes = 0
    const deadline = this.clock.setTimeout(() => {
      held.expired = true
      if (held.sending) return // Discord's answer is on its way; a retry after it is refused
      held.controller.abort()
      answer(() => this.answerHeld(res))
    }, this.limits.maxHoldMs - (this.clock.now() - arrivedAt))
    res.on('close', () => {
      if (res.writableFinished) return
      held.expired = true
      if (!held.sending) held.controller.abort()
      answer(() => this.count('client_gone'))
    })
    try {
      const body = await readBody(req, this.limits.maxBodyBytes, (n) => {
        bodyBytes += n
        this.bufferedBytes += n
      })
      if (body === null) {
        answer(() => {
          this.count('refused_bad_request')
          sendRefusal(res, 413, 'body_too_large', `the request body is over ${this.limits.maxBodyBytes} bytes`, undefined, true)
        })
        return
      }
      const response = await this.clientFor(route.version).queueRequest({
        fullRoute: route.fullRoute,
        method: route.method as never,
        ...(route.version === null ? { versioned: false } : {}),
        query: route.query,
        auth: false, // the bot's own header is forwarded as it came
        headers: forwardedHeaders(req, held.id),
        ...(body.length === 0 ? {} : { body, passThroughBody: true }),
        signal: held.controller.signal,
      })
      const data = Buffer.from(await response.arrayBuffer())
      answer(() => {
        this.count('sent')
        res.writeHead(response.status, answerHeaders(response.headers, data.length)).end(data)
      })
    } catch (err) {
      answer(() => this.answerError(res, err))
    } finally {
      this.clock.clearTimeout(deadline)
      this.held.delete(held.id)
      this.bufferedBytes -= bodyBytes
    }
  }

  private answerHeld(res: ServerResponse): void {
    this.count('held_expired')
    const share = this.pacer.current()
    if (share === null || share.perSecond <= 0) {
      sendRefusal(res, 503, 'no_share', "The node holds no REST share (no lease from the controller, or its configuration has no \"rest\"), so the proxy sends nothing to Discord.", 5, true)
      return
    }
    const waitS = Math.max(1, Math.ceil(this.pacer.waiting / share.perSecond))
    sendRateLimited(res, 'held_too_long', `The request waited ${this.limits.maxHoldMs} ms for the node's REST share (${share.perSecond}/s) without being sent.`, waitS, true)
  }

  private answerError(res: ServerResponse, err: unknown): void {
    const { DiscordAPIError, HTTPError } = this.mod
    if (err instanceof HeldBackError) {
      if (err.kind === 'expired') return this.answerHeld(res)
      this.count('refused_invalid_budget')
      const share = this.pacer.current()
      return sendRateLimited(res, 'invalid_budget', "The node's invalid-request budget is spent; nothing is sent to Discord until the window frees some.", share === null ? 1 : this.invalid.msUntilBelow(share.invalidBudget, this.clock.now()) / 1000)
    }
    if (err instanceof DiscordAPIError) {
      this.count('sent')
      const text = JSON.stringify(err.rawError)
      res.writeHead(err.status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) }).end(text)
      return
    }
    if (err instanceof HTTPError) {
      this.count('sent')
      return sendRefusal(res, err.status, 'upstream_error', `Discord answered ${err.status}`)
    }
    this.count('upstream_error')
    const name = err instanceof Error ? err.name : 'unknown'
    // the name and code only: a message may quote the URL, and a webhook's path holds its token
    this.logger.warn({ error: name, code: (err as { cause?: { code?: string } })?.cause?.code }, 'a request to Discord failed')
    if (name === 'TimeoutError') return sendRefusal(res, 504, 'upstream_timeout', `Discord did not answer within ${this.limits.upstreamTimeoutMs} ms`)
    sendRefusal(res, 502, 'upstream_error', 'the request to Discord failed')
  }

  /** One @discordjs/rest client per API version the bot uses (its buckets are per route); the gate is shared. */
  private clientFor(version: string | null): InstanceType<DiscordRestModule['REST']> {
    const key = version ?? 'none'
    let client = this.clients.get(key)
    if (client === undefined) {
      client = new this.mod.REST({
        api: this.upstream,
        version: version ?? '10',
        // out of the way: the gate paces every try at the node's share instead
        globalRequestsPerSecond: Number.POSITIVE_INFINITY,
        // the proxy's own waits are shorter; this only keeps @discordjs/rest from cutting a try short itself
        timeout: this.limits.maxHoldMs + this.limits.upstreamTimeoutMs + 5000,
        retries: 3,
        makeRequest: this.makeRequest as never,
      })
      this.clients.set(key, client)
    }
    return client
  }
}

