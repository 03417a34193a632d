/**
 * The REST side of the emulator, on the gateway's port under /api/v10: Discord's rules in the order a
 * request meets them. A banned client is refused before anything else (the ban is Cloudflare's, in
 * front of the API); then the route (404, 405), the token (401), the global limit (429 global), the
 * route's bucket (429 user), the channel's shared resource limit (429 shared) and its permissions
 * (403); then the answer. Every request is
 * recorded; invalid answers are counted per client and lead to a ban.
 */
import { createHash } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { performance } from 'node:perf_hooks'
import { createMessage, getAnswer, httpError, type Answer, type GatewayAnswers } from './rest-answers.js'
import { GlobalWindow, InvalidLedger, RouteBuckets, type BucketAnswer } from './rest-limits.js'
import type { ResolvedRestOptions } from './rest-options.js'
import { summarise, type RestOutcome, type RestRequestRecord, type RestStats } from './rest-records.js'
import { bucketOf, matchRoute, type RestRoute } from './rest-routes.js'

/** What the REST side needs from the emulator. */
export interface RestHost extends GatewayAnswers {
  currentToken(): string
  countGatewayBotRequest(): void
}

const MAX_BODY_BYTES = 64 * 1024

/**
 * The answer a banned client gets: 429 with no Retry-After and no rate-limit headers, as Discord
 * staff confirmed an IP ban looks (discord/discord-api-docs#5810). Cloudflare sometimes answers a
 * plain-text "error code: 1015" instead; a client must treat both alike.
 */
export const BAN_BODY = {
  message: 'You are being blocked from accessing our API temporarily due to exceeding our rate limits frequently. Please read our docs at https://discord.com/developers/docs/topics/rate-limits to prevent this moving forward.',
  code: 0,
} as const

// An opaque bucket ID per route, stable across runs, like Discord's hashes (major parameters excluded).
const bucketHash = (route: RestRoute): string => createHash('sha256').update(`pxe-emulator:${route.name}`).digest('hex').slice(0, 32)

// ms to seconds, rounded up to the millisecond (never early), ignoring float noise: (t + 1000) - t may be 1000.0000000001
const seconds = (ms: number): string => (Math.ceil(Math.max(0, ms) - 1e-6) / 1000).toFixed(3)

/** One request's verdict before its body is read. */
interface Verdict {
  readonly answer: Answer | null
  readonly outcome: RestOutcome
  readonly headers: Record<string, string>
  readonly admitted: boolean
}

/** The REST API: `handle` is the HTTP server's request handler. */
export class RestApi {
  readonly records: RestRequestRecord[] = []
  private readonly startedAt = performance.now()
  private readonly startedEpochMs = Date.now()
  private readonly global: GlobalWindow
  private readonly buckets = new RouteBuckets()
  private readonly ledger: InvalidLedger

  constructor(
    readonly options: ResolvedRestOptions,
    private readonly host: RestHost,
  ) {
    this.global = new GlobalWindow(options.globalPerSecond)
    this.ledger = new InvalidLedger(options.invalidLimit, options.invalidWindowMs, options.banMs)
  }

  /** Milliseconds since the REST side started (the clock of every limit and record). */
  now(): number {
    return performance.now() - this.startedAt
  }

  stats(): RestStats {
    const now = this.now()
    return {
      ...summarise(this.records),
      invalidByClient: this.ledger.totalsByClient(),
      invalidInWindowByClient: this.ledger.inWindowByClient(now),
      bans: [...this.ledger.bans],
      bannedClients: this.ledger.bannedAt(now),
    }
  }

  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    const at = this.now()
    const client = this.clientOf(req)
    const method = req.method ?? 'GET'
    if (this.ledger.banOf(client, at)) {
      this.finish(res, { at, client, method, route: null, majorId: null }, { status: 429, body: BAN_BODY }, 'banned', {}, false)
      return
    }
    const match = matchRoute(method, new URL(req.url ?? '/', 'http://emulator').pathname)
    if (match.kind !== 'route') {
      const answer = match.kind === 'not_found' ? httpError(404, 'Not Found') : httpError(405, 'Method Not Allowed')
      this.finish(res, { at, client, method, route: null, majorId: null }, answer, match.kind, {}, false)
      return
    }
    const { route, majorId } = match
    const base = { at, client, method, route: route.name, majorId }
    const verdict = this.judge(req, route, majorId, at)
    if (verdict.answer) return this.finish(res, base, verdict.answer, verdict.outcome, verdict.headers, verdict.admitted)
    if (route.method === 'GET') return this.finish(res, base, getAnswer(route.name, majorId, this.host), 'ok', verdict.headers, verdict.admitted)
    readBody(req, (body) => {
      const answer = body === null ? { status: 413, body: { message: 'Request entity too large', code: 40005 } } : createMessage(majorId ?? '', body)
      this.finish(res, base, answer, answer.status === 200 ? 'ok' : 'bad_request', verdict.headers, true)
    })
  }

  /** The limits a matched request meets, in Discord's order; `answer` null means it may be served. */
  private judge(req: IncomingMessage, route: RestRoute, majorId: string | null, at: number): Verdict {
    if (route.name === 'get_gateway_bot') this.host.countGatewayBotRequest()
    if (!route.auth) return { answer: null, outcome: 'ok', headers: {}, admitted: false }
    if (req.headers.authorization !== `Bot ${this.host.currentToken()}`) {
      return { answer: httpError(401, 'Unauthorized'), outcome: 'unauthorized', headers: {}, admitted: false }
    }
    // One bot per emulator: the global window is the bot's, whichever of its tokens is current.
    const global = this.global.take(at)
    if (!global.ok) {
      const retry = seconds(global.retryAfterMs)
      const headers = { 'retry-after': String(Math.ceil(Number(retry))), 'x-ratelimit-global': 'true', 'x-ratelimit-scope': 'global' }
      const body = { message: 'You are being rate limited.', retry_after: Number(retry), global: true }
      return { answer: { status: 429, body }, outcome: 'global_limited', headers, admitted: false }
    }
    const limit = bucketOf(route, this.options.routeLimits)
    if (!limit) return { answer: null, outcome: 'ok', headers: {}, admitted: true }
    const bucket = this.buckets.take(`${route.name}:${majorId ?? ''}`, limit, at)
    const headers = this.bucketHeaders(route, bucket, at)
    if (!bucket.ok) {
      const retry = seconds(bucket.resetAt - at)
      Object.assign(headers, { 'retry-after': String(Math.ceil(Number(retry))), 'x-ratelimit-scope': 'user' })
      const body = { message: 'You are being rate limited.', retry_after: Number(retry), global: false }
      return { answer: { status: 429, body }, outcome: 'route_limited', headers, admitted: true }
    }
    const channel = route.major === 'channel_id' ? majorId : null
    if (channel !== null && this.options.sharedLimitedChannelIds.has(channel)) {
      Object.assign(headers, { 'retry-after': '1', 'x-ratelimit-scope': 'shared' })
      const body = { message: 'The resource is being rate limited.', retry_after: 1, global: false }
      return { answer: { status: 429, body }, outcome: 'shared_limited', headers, admitted: true }
    }
    if (channel !== null && this.options.forbiddenChannelIds.has(channel)) {
      return { answer: { status: 403, body: { message: 'Missing Access', code: 50001 } }, outcome: 'forbidden', headers, admitted: true }
    }
    return { answer: null, outcome: 'ok', headers, admitted: true }
  }

  private bucketHeaders(route: RestRoute, bucket: BucketAnswer, at: number): Record<string, string> {
    return {
      'x-ratelimit-limit': String(bucket.limit),
      'x-ratelimit-remaining': String(bucket.remaining),
      'x-ratelimit-reset': ((this.startedEpochMs + bucket.resetAt) / 1000).toFixed(3),
      'x-ratelimit-reset-after': seconds(bucket.resetAt - at),
      'x-ratelimit-bucket': bucketHash(route),
    }
  }

  private clientOf(req: IncomingMessage): string {
    const header = this.options.clientHeader === null ? undefined : req.headers[this.options.clientHeader]
    const named = Array.isArray(header) ? header[0] : header
    if (named && named.length <= 200) return named
    return req.socket.remoteAddress ?? 'unknown'
  }

  private finish(
    res: ServerResponse,
    base: Pick<RestRequestRecord, 'at' | 'client' | 'method' | 'route' | 'majorId'>,
    answer: Answer,
    outcome: RestOutcome,
    headers: Record<string, string>,
    admitted: boolean,
  ): void {
    // "An invalid request is one that results in 401, 403, or 429 statuses ... 429 errors returned with
    // X-RateLimit-Scope: shared are not counted against you"; a ban's refusal never reached the API.
    const counted = outcome !== 'banned' && outcome !== 'shared_limited'
    const invalid = counted && (answer.status === 401 || answer.status === 403 || answer.status === 429)
    if (invalid) this.ledger.count(base.client, base.at)
    this.records.push({ ...base, status: answer.status, outcome, invalid, admitted })
    const text = JSON.stringify(answer.body)
    res.writeHead(answer.status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
    res.end(text)
  }
}

/** Reads a request body of at most MAX_BODY_BYTES; null when it is larger. */
function readBody(req: IncomingMessage, done: (body: string | null) => void): void {
  const chunks: Buffer[] = []
  let size = 0
  let over = false
  let called = false
  const once = (body: string | null) => {
    if (!called) done(body)
    called = true
  }
  req.on('data', (chunk: Buffer) => {
    size += chunk.length
    if (size > MAX_BODY_BYTES) over = true
    else chunks.push(chunk)
  })
  req.on('end', () => once(over ? null : Buffer.concat(chunks).toString('utf8')))
  req.on('error', () => once(null))
}
