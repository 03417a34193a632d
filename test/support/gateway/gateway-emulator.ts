/**
 * A Discord gateway on 127.0.0.1 for tests: `startGatewayEmulator(options)` listens on two random
 * ports, the gateway's (GET /api/v10/gateway/bot and the WebSocket) and READY's resume_gateway_url (a
 * second, path-free URL, so a test can tell a resume that used it from one that did not). It enforces
 * Discord's rules and records every breach; the hooks below make it misbehave the ways Discord does.
 * Under /api/v10 it is also a small Discord REST API with Discord's rate limits (rest-http.ts).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import { WebSocketServer } from 'ws'
import { checkDelivery, deliveryEntry, type DeliveryReport, type ReceivedEvent } from './delivery-check.js'
import type { SessionState, SessionView } from './emulated-session.js'
import { resolveOptions, type GatewayEmulatorOptions, type ResolvedOptions } from './emulator-options.js'
import type { Breach, GatewayStats, IdentifyRecord, ResumeRecord } from './emulator-records.js'
import { Close, Op, serverCloseEndsSession } from './gateway-codes.js'
import type { ConnectionView, GatewayConnection } from './gateway-connection.js'
import { GatewayCore } from './gateway-core.js'
import { RestApi } from './rest-http.js'
import type { RestRequestRecord, RestStats } from './rest-records.js'

/** Which live connections a hook acts on: every one serving `shardId` (of `numShards`, when given). */
export interface ShardSelector {
  readonly numShards?: number
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return (server.address() as AddressInfo).port
}

export class GatewayEmulator {
  private constructor(
    private readonly core: GatewayCore,
    private readonly servers: readonly Server[],
    private readonly wss: WebSocketServer,
    private readonly restApi: RestApi,
    /** The gateway's port (HTTP API and WebSocket). */
    readonly port: number,
    /** The resume_gateway_url's port (WebSocket only). */
    readonly resumePort: number,
  ) {}

  /** Starts an emulator; stop it with `stop()` (e.g. in `t.teardown`). */
  static async start(options: GatewayEmulatorOptions = {}): Promise<GatewayEmulator> {
    const core = new GatewayCore(resolveOptions(options))
    const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 1 << 20 })
    const upgrade = (via: 'gateway' | 'resume') => (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const url = new URL(req.url ?? '/', 'http://emulator')
      if (url.pathname !== '/') {
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n')
        return
      }
      wss.handleUpgrade(req, socket, head, (ws) => core.openConnection(ws, via, url.searchParams))
    }
    let gatewayUrl = ''
    const restApi = new RestApi(core.options.rest, {
      get gatewayUrl() {
        return gatewayUrl
      },
      currentToken: () => core.currentToken(),
      recommendedShards: () => core.options.shardCount,
      sessionStartLimit: () => core.sessionStartLimit(),
      countGatewayBotRequest: () => void core.gatewayBotRequests++,
    })
    const api = createServer(restApi.handle)
    const resume = createServer((_req, res) => res.writeHead(404).end())
    api.on('upgrade', upgrade('gateway'))
    resume.on('upgrade', upgrade('resume'))
    const port = await listen(api)
    const resumePort = await listen(resume)
    gatewayUrl = `ws://127.0.0.1:${port}`
    core.resumeUrl = `ws://127.0.0.1:${resumePort}`
    return new GatewayEmulator(core, [api, resume], wss, restApi, port, resumePort)
  }

  /** GET /gateway/bot's `url`. */
  get url(): string {
    return `ws://127.0.0.1:${this.port}`
  }

  /** READY's `resume_gateway_url`. */
  get resumeUrl(): string {
    return this.core.resumeUrl
  }

  /** The `api` option for @discordjs/rest's REST (it appends /v10/gateway/bot). */
  get apiUrl(): string {
    return `http://127.0.0.1:${this.port}/api`
  }

  /** The REST side's totals now: requests, 429s, per-second counts, invalid requests, bans. */
  get restStats(): RestStats {
    return this.restApi.stats()
  }

  /** Every REST request so far, in the order they were answered (`at`: ms since the emulator started). */
  get restRequests(): readonly RestRequestRecord[] {
    return this.restApi.records
  }

  /** Milliseconds since the emulator started on the REST side's clock (the `at` of its records and bans). */
  restNow(): number {
    return this.restApi.now()
  }

  /** The valid token (it changes when the session start limit resets it). */
  get token(): string {
    return this.core.currentToken()
  }

  get options(): ResolvedOptions {
    return this.core.options
  }

  /** Every breach so far, oldest first. */
  get breaches(): readonly Breach[] {
    return this.core.breaches
  }

  /** Every IDENTIFY that named a shard, oldest first. */
  get identifies(): readonly IdentifyRecord[] {
    return this.core.identifies
  }

  /** Every RESUME, oldest first. */
  get resumes(): readonly ResumeRecord[] {
    return this.core.resumes
  }

  get stats(): GatewayStats {
    return this.core.stats()
  }

  /** Sessions, oldest first, optionally only those of a shard or in a state. */
  sessions(filter: { shardId?: number; numShards?: number; state?: SessionState } = {}): SessionView[] {
    return [...this.core.sessions.values()]
      .filter((s) => filter.shardId === undefined || s.shardId === filter.shardId)
      .filter((s) => filter.numShards === undefined || s.numShards === filter.numShards)
      .filter((s) => filter.state === undefined || s.state === filter.state)
      .map((s) => s.view())
  }

  session(sessionId: string): SessionView | undefined {
    return this.core.sessions.get(sessionId)?.view()
  }

  /** Every connection so far, oldest first. */
  connections(): ConnectionView[] {
    return this.core.connections.map((c) => c.view())
  }

  /** The guild IDs shard `shardId` of `numShards` serves. */
  guildsOfShard(shardId: number, numShards: number): string[] {
    return this.core.layout.ofShard(shardId, numShards)
  }

  /** Produces `count` test events on a session now (live: sent; resumable: queued). Returns how many. */
  produce(sessionId: string, count = 1): number {
    const session = this.core.sessions.get(sessionId)
    let produced = 0
    for (let i = 0; i < count && session?.produceEvent(); i++) produced++
    return produced
  }

  /** Stops every session's timed test events (a test's quiet point before it compares deliveries). */
  pauseEvents(): void {
    this.core.setEventsPaused(true)
  }

  resumeEvents(): void {
    this.core.setEventsPaused(false)
  }

  /**
   * Invalidates a session: its next RESUME is refused (INVALID_SESSION d:false). A live one is told
   * at once with INVALID_SESSION d:false, as when "the gateway has invalidated an active session".
   */
  invalidateSession(sessionId: string): boolean {
    const session = this.core.sessions.get(sessionId)
    if (!session?.alive) return false
    const connection = this.core.connections.find((c) => c.session === session)
    session.finish('invalidated', 'invalidated by the test')
    if (connection) {
      connection.session = null
      connection.invalidSession(false)
    }
    return true
  }

  /**
   * Sends op 7 RECONNECT. "A few seconds after the reconnect event is dispatched, the connection may be
   * closed by the server": if the client has not closed within `closeAfterMs` (default 5000; null:
   * never) the emulator closes it with 4000, keeping the session resumable.
   */
  sendReconnect(shardId: number, options: ShardSelector & { closeAfterMs?: number | null } = {}): number {
    const closeAfterMs = options.closeAfterMs === undefined ? 5000 : options.closeAfterMs
    return this.eachLive(shardId, options, (c) => {
      c.sendPayload({ op: Op.Reconnect, d: null, s: null, t: null })
      if (closeAfterMs === null) return
      setTimeout(() => c.close(Close.UnknownError, 'reconnect requested', { keep: true }), closeAfterMs).unref()
    })
  }

  /**
   * Closes with `code`. The session ends for 1000, 1001, 4004, 4007 and 4010-4014 (Discord's "do not
   * reconnect" codes) and stays resumable otherwise, unless `keepSession` says otherwise.
   */
  closeWith(shardId: number, code: number, options: ShardSelector & { keepSession?: boolean } = {}): number {
    const keep = options.keepSession ?? !serverCloseEndsSession(code)
    return this.eachLive(shardId, options, (c) => c.close(code, 'closed by the test', keep ? { keep: true } : { keep: false, reason: `server closed ${code}` }))
  }

  /** Drops the TCP connection without a close frame; the session stays resumable. */
  dropConnection(shardId: number, options: ShardSelector = {}): number {
    return this.eachLive(shardId, options, (c) => c.drop())
  }

  /** Stops (or, with `withhold: false`, restarts) answering heartbeats, so the client sees a zombie connection. */
  withholdAcks(shardId: number, options: ShardSelector & { withhold?: boolean } = {}): number {
    return this.eachLive(shardId, options, (c) => (c.withholdAcks = options.withhold ?? true))
  }

  /** Compares what the bot received with every test event produced (of `sessionIds`, when given). */
  checkDelivery(received: Iterable<ReceivedEvent>, options: { sessionIds?: readonly string[] } = {}): DeliveryReport {
    const ids = options.sessionIds
    const sessions = [...this.core.sessions.values()].filter((s) => !ids || ids.includes(s.id)).map((s) => s.view())
    return checkDelivery(sessions, received)
  }

  /** What a receiver reports for a dispatch it got on `shardId`: a test event's entry, or null. */
  deliveryEntry(shardId: number, payload: { t?: unknown; s?: unknown; d?: unknown }): ReceivedEvent | null {
    return deliveryEntry(shardId, payload, this.core.options.eventType)
  }

  /** Resolves once `predicate()` holds (checked every 10 ms); rejects after `timeoutMs` (default 10,000). */
  async waitFor(predicate: () => boolean, options: { timeoutMs?: number; what?: string } = {}): Promise<void> {
    const timeoutMs = options.timeoutMs ?? 10_000
    const deadline = Date.now() + timeoutMs
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`gateway emulator: timed out after ${timeoutMs} ms waiting for ${options.what ?? 'a condition'}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }

  /** Closes every connection and both listeners; sessions stop producing. */
  async stop(): Promise<void> {
    this.core.setEventsPaused(true)
    for (const c of this.core.connections) c.drop()
    for (const s of this.core.sessions.values()) if (s.alive) s.finish('ended', 'emulator stopped')
    for (const ws of this.wss.clients) ws.terminate()
    this.wss.close()
    await Promise.all(
      this.servers.map(
        (server) =>
          new Promise<void>((resolve) => {
            server.closeAllConnections()
            server.close(() => resolve())
          }),
      ),
    )
  }

  private eachLive(shardId: number, selector: ShardSelector, act: (c: GatewayConnection) => void): number {
    const targets = this.core.connections.filter(
      (c) => c.live && c.session?.shardId === shardId && (selector.numShards === undefined || c.session.numShards === selector.numShards),
    )
    for (const c of targets) act(c)
    return targets.length
  }
}

/** Starts a gateway emulator on 127.0.0.1 (random ports). */
export function startGatewayEmulator(options: GatewayEmulatorOptions = {}): Promise<GatewayEmulator> {
  return GatewayEmulator.start(options)
}
