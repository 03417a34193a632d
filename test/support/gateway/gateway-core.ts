/**
 * The rules that span connections: who may IDENTIFY (token, shard, intents, guild limit, bucket
 * window, session start budget), which RESUME continues which session, what a close does to a
 * session, and which live sessions overlap. Everything it decides is recorded for the tests.
 */
import { randomBytes } from 'node:crypto'
import type { WebSocket } from 'ws'
import { parseIdentify, parseResume, shardPair } from './client-payloads.js'
import { EmulatedSession } from './emulated-session.js'
import type { ResolvedOptions } from './emulator-options.js'
import type { Breach, Count, GatewayStats, IdentifyRecord, ResumeRecord, ShardRef } from './emulator-records.js'
import { API_VERSION, Close, closeEndsSession, KNOWN_INTENTS, PRIVILEGED_INTENTS } from './gateway-codes.js'
import { GatewayConnection, type ConnectionHost, type SessionFate } from './gateway-connection.js'
import { GuildLayout, witnessGuildId } from './guild-layout.js'
import { IdentifyGate } from './identify-gate.js'

const USER_ID = '1000000000000000001'

class Counter {
  total = 0
  readonly byShard: Record<number, number> = {}
  add(shardId: number | null): void {
    this.total++
    if (shardId !== null) this.byShard[shardId] = (this.byShard[shardId] ?? 0) + 1
  }
  snapshot(): Count {
    return { total: this.total, byShard: { ...this.byShard } }
  }
}

export class GatewayCore implements ConnectionHost {
  readonly breaches: Breach[] = []
  readonly identifies: IdentifyRecord[] = []
  readonly resumes: ResumeRecord[] = []
  readonly sessions = new Map<string, EmulatedSession>()
  readonly connections: GatewayConnection[] = []
  readonly layout: GuildLayout
  resumeUrl = ''
  eventsPaused = false
  gatewayBotRequests = 0
  private token: string
  private tokenResets = 0
  private readonly gate: IdentifyGate
  private readonly startedAt = Date.now()
  private readonly counters = { identifies: new Counter(), started: new Counter(), resumes: new Counter(), refused: new Counter() }
  private readonly overlapPairs = new Set<string>()

  constructor(readonly options: ResolvedOptions) {
    this.token = options.token
    this.layout = new GuildLayout(options.guildCount)
    const { total, remaining, resetAfter } = options.sessionStartLimit
    this.gate = new IdentifyGate(options.maxConcurrency, options.identifyWindowMs, total, remaining, resetAfter, 0)
  }

  elapsed(): number {
    return Date.now() - this.startedAt
  }

  currentToken(): string {
    return this.token
  }

  sessionStartLimit(): ReturnType<IdentifyGate['limit']> {
    return this.gate.limit(this.elapsed())
  }

  record(breach: Breach): void {
    this.breaches.push(breach)
  }

  stats(): GatewayStats {
    const c = this.counters
    return {
      identifies: c.identifies.snapshot(),
      sessionsStarted: c.started.snapshot(),
      resumes: c.resumes.snapshot(),
      refusedResumes: c.refused.snapshot(),
      connections: this.connections.length,
      gatewayBotRequests: this.gatewayBotRequests,
      sessionStartsRemaining: this.sessionStartLimit().remaining,
    }
  }

  /** A new WebSocket on the gateway or resume URL: HELLO, unless its query string is refused. */
  openConnection(socket: WebSocket, via: 'gateway' | 'resume', query: URLSearchParams): void {
    const connection = new GatewayConnection(this.connections.length + 1, via, socket, this, query.get('compress') === 'zlib-stream')
    this.connections.push(connection)
    if (this.acceptQuery(connection, query)) connection.hello()
  }

  /** Checks the query string of a new connection; false when it was refused. */
  private acceptQuery(connection: GatewayConnection, query: URLSearchParams): boolean {
    if (query.get('v') !== API_VERSION) {
      connection.refuse(Close.InvalidApiVersion, `v=${query.get('v') ?? '(missing)'}; the emulator serves v=${API_VERSION}`)
      return false
    }
    const encoding = query.get('encoding') ?? 'json'
    if (encoding !== 'json') {
      connection.refuse(Close.UnknownError, `encoding=${encoding} is not emulated (json only)`)
      return false
    }
    const compress = query.get('compress')
    if (compress !== null && compress !== 'zlib-stream') {
      connection.refuse(Close.UnknownError, `compress=${compress} is not emulated (zlib-stream only)`)
      return false
    }
    return true
  }

  onIdentify(connection: GatewayConnection, d: unknown): void {
    const now = this.elapsed()
    this.counters.identifies.add(shardPair((d as { shard?: unknown } | null)?.shard)?.[0] ?? null)
    if (connection.session) return connection.refuse(Close.AlreadyAuthenticated, 'IDENTIFY on an authenticated connection')
    const parsed = parseIdentify(d)
    if (!parsed.ok) return connection.refuse(Close.UnknownOpcode, `invalid IDENTIFY: ${parsed.problem}`)
    const { token, intents, shard } = parsed.data
    const pair = shardPair(shard)
    const refuse = (code: number, detail: string): void => {
      if (pair) this.logIdentify(connection, pair, now, 'closed', code, null)
      this.refuseWithShard(connection, code, detail, pair?.[0] ?? null)
    }
    if (token !== this.token) return refuse(Close.AuthenticationFailed, 'IDENTIFY with a wrong token')
    const [shardId, numShards] = pair ?? [-1, 0]
    if (!pair || shardId < 0 || numShards < 1 || shardId >= numShards || numShards % this.options.shardCountMultiple !== 0) {
      return refuse(Close.InvalidShard, `invalid shard ${JSON.stringify(shard)}`)
    }
    if (!Number.isInteger(intents) || (intents as number) < 0 || (intents as number) > 0x3ffffff || ((intents as number) & ~KNOWN_INTENTS) !== 0) {
      return refuse(Close.InvalidIntents, `invalid intents ${JSON.stringify(intents)}`)
    }
    if ((intents as number) & PRIVILEGED_INTENTS & ~this.options.allowedPrivilegedIntents) {
      return refuse(Close.DisallowedIntents, `privileged intents ${intents} not enabled for this application`)
    }
    const guilds = this.layout.countOfShard(shardId, numShards)
    if (guilds > this.options.guildsPerShardLimit) {
      return refuse(Close.ShardingRequired, `shard [${shardId}, ${numShards}] would hold ${guilds} guilds (limit ${this.options.guildsPerShardLimit})`)
    }
    this.admitIdentify(connection, { shardId, numShards }, now)
  }

  onResume(connection: GatewayConnection, d: unknown): void {
    const now = this.elapsed()
    if (connection.session) return connection.refuse(Close.AlreadyAuthenticated, 'RESUME on an authenticated connection')
    const parsed = parseResume(d)
    if (!parsed.ok) return connection.refuse(Close.UnknownOpcode, `invalid RESUME: ${parsed.problem}`)
    const { token, session_id: sessionId } = parsed.data
    const seq = parsed.data.seq ?? 0
    if (token !== this.token) return connection.refuse(Close.AuthenticationFailed, 'RESUME with a wrong token')
    const session = this.sessions.get(sessionId)
    const base = { at: now, connectionId: connection.id, via: connection.via, sessionId, seq, replayed: 0, tookOverConnectionId: null }
    const where = { shardId: session?.shardId ?? null, numShards: session?.numShards ?? null }
    if (!session || !session.alive) {
      // "It's possible your app won't reconnect in time to Resume, in which case it will receive an Invalid Session".
      const reason = session ? (session.state as 'ended' | 'expired' | 'invalidated') : 'unknown'
      this.resumes.push({ ...base, ...where, outcome: 'refused', reason })
      this.counters.refused.add(where.shardId)
      connection.invalidSession(false)
      return
    }
    const previous = this.connections.find((c) => c.session === session) ?? null
    if (seq > session.lastSeq) {
      // 4007 "Invalid seq ... Reconnect and start a new session": the session is over.
      this.resumes.push({ ...base, ...where, outcome: 'closed', reason: 'invalid_seq' })
      const detail = `RESUME seq ${seq} > last sequence ${session.lastSeq}`
      if (previous) {
        previous.session = null
        previous.invalidSession(false)
      }
      session.finish('invalidated', detail)
      return this.refuseWithShard(connection, Close.InvalidSeq, detail, session.shardId)
    }
    // Still live elsewhere: the client judged that connection dead (a zombie); this one takes over.
    if (previous) {
      previous.session = null
      previous.close(Close.UnknownError, 'session resumed on another connection', { keep: true })
    }
    const replay = session.replayAfter(seq)
    session.attach(connection)
    connection.session = session
    for (const json of replay) connection.sendText(json)
    session.dispatch('RESUMED', {})
    this.resumes.push({ ...base, ...where, outcome: 'resumed', reason: null, replayed: replay.length, tookOverConnectionId: previous?.id ?? null })
    this.counters.resumes.add(session.shardId)
    this.checkOverlaps(connection, session)
  }

  onServerClose(connection: GatewayConnection, fate: SessionFate): void {
    const session = connection.session
    if (!session) return
    connection.session = null
    if (fate.keep) session.detach(this.options.resumeWindowMs)
    else session.finish('ended', fate.reason)
  }

  onClosed(connection: GatewayConnection, code: number): void {
    const session = connection.session
    if (!session) return
    connection.session = null
    // "When you close the connection with close code 1000 or 1001, your session will be invalidated";
    // any other code, or a dropped socket, leaves it resumable.
    if (closeEndsSession(code)) session.endByClient(code)
    else session.detach(this.options.resumeWindowMs)
  }

  /** Starts or stops every alive session's test events. */
  setEventsPaused(paused: boolean): void {
    this.eventsPaused = paused
    for (const s of this.sessions.values()) {
      if (paused) s.stopEvents()
      else s.startEvents(this.options.eventsPerSecond)
    }
  }

  private admitIdentify(connection: GatewayConnection, shard: ShardRef, now: number): void {
    const { shardId, numShards } = shard
    const bucket = this.gate.bucketOf(shardId)
    const verdict = this.gate.check(shardId, now)
    if (!verdict.ok && verdict.reason === 'bucket') {
      const sincePreviousMs = now - verdict.previousAt
      const detail = `second IDENTIFY in bucket ${bucket} within ${this.options.identifyWindowMs} ms (${sincePreviousMs} ms after the previous)`
      this.record({ kind: 'bucket', at: now, connectionId: connection.id, ...shard, bucket, previousAt: verdict.previousAt, sincePreviousMs, detail })
      this.logIdentify(connection, [shardId, numShards], now, 'bucket_refused', null, null)
      // "If your app exceeds this limit, Discord will respond with a Invalid Session (opcode 9) event."
      connection.invalidSession(false)
      return
    }
    if (!verdict.ok) {
      this.record({ kind: 'session_start_limit', at: now, connectionId: connection.id, ...shard, detail: 'IDENTIFY with no session starts remaining' })
      this.logIdentify(connection, [shardId, numShards], now, 'limit_exceeded', Close.AuthenticationFailed, null)
      this.resetToken()
      return
    }
    this.gate.accept(shardId, now)
    const guildIds = this.layout.ofShard(shardId, numShards)
    const session = new EmulatedSession(randomBytes(16).toString('hex'), shardId, numShards, guildIds, this.options.eventType, () => this.elapsed())
    this.sessions.set(session.id, session)
    session.attach(connection)
    connection.session = session
    this.logIdentify(connection, [shardId, numShards], now, 'ready', null, session.id)
    this.counters.started.add(shardId)
    session.dispatch('READY', {
      v: Number(API_VERSION),
      user: { id: USER_ID, username: 'pxe-emulator', discriminator: '0', global_name: null, avatar: null, bot: true, flags: 0 },
      guilds: guildIds.map((id) => ({ id, unavailable: true })),
      session_id: session.id,
      resume_gateway_url: this.resumeUrl,
      shard: [shardId, numShards],
      application: { id: USER_ID, flags: 0 },
    })
    if (this.options.sendGuildCreates) {
      for (const id of guildIds) session.dispatch('GUILD_CREATE', { id, name: `guild ${id}`, unavailable: false, member_count: 1 }, null, id)
    }
    this.checkOverlaps(connection, session)
    if (!this.eventsPaused) session.startEvents(this.options.eventsPerSecond)
  }

  /**
   * The session start limit: "Upon hitting this limit, all active sessions for the app will be
   * terminated, the bot token will be reset". Every session ends, every connection closes 4004, and
   * the old token stops working (GET /gateway/bot answers 401); `emulator.token` is the new one.
   */
  private resetToken(): void {
    this.tokenResets++
    this.token = `${this.options.token}-reset-${this.tokenResets}`
    for (const c of this.connections) if (c.open) c.close(Close.AuthenticationFailed, 'token reset', { keep: false, reason: 'token reset' })
    for (const s of this.sessions.values()) if (s.alive) s.finish('ended', 'token reset after the session start limit')
  }

  /** Two live sessions on one [shard, count], or on counts whose shards share guilds (recorded once per pair). */
  private checkOverlaps(connection: GatewayConnection, session: EmulatedSession): void {
    for (const other of this.connections) {
      const o = other.session
      if (other === connection || !other.live || !o) continue
      const pairKey = [session.id, o.id].sort().join('/')
      if (this.overlapPairs.has(pairKey)) continue
      const base = { at: this.elapsed(), connectionId: connection.id }
      if (o.shardId === session.shardId && o.numShards === session.numShards) {
        this.overlapPairs.add(pairKey)
        const detail = `sessions ${o.id} and ${session.id} both live for [${session.shardId}, ${session.numShards}]`
        this.record({ kind: 'overlap', ...base, shardId: session.shardId, numShards: session.numShards, sessionIds: [o.id, session.id], detail })
        continue
      }
      const witness = o.numShards === session.numShards ? null : witnessGuildId(session.shardId, session.numShards, o.shardId, o.numShards)
      if (witness === null) continue
      this.overlapPairs.add(pairKey)
      const a = { sessionId: o.id, shardId: o.shardId, numShards: o.numShards }
      const b = { sessionId: session.id, shardId: session.shardId, numShards: session.numShards }
      const commonGuilds = this.layout.commonCount(a.shardId, a.numShards, b.shardId, b.numShards)
      const detail = `[${a.shardId}, ${a.numShards}] and [${b.shardId}, ${b.numShards}] both live and share guilds (e.g. ${witness})`
      this.record({ kind: 'guild_overlap', ...base, a, b, witnessGuildId: witness, commonGuilds, detail })
    }
  }

  private logIdentify(connection: GatewayConnection, [shardId, numShards]: [number, number], at: number, outcome: IdentifyRecord['outcome'], closeCode: number | null, sessionId: string | null): void {
    this.identifies.push({ at, connectionId: connection.id, shardId, numShards, bucket: this.gate.bucketOf(Math.max(0, shardId)), outcome, closeCode, sessionId })
  }

  private refuseWithShard(connection: GatewayConnection, code: number, detail: string, shardId: number | null): void {
    this.record({ kind: 'protocol', at: this.elapsed(), connectionId: connection.id, closeCode: code, shardId, sessionId: null, detail })
    connection.close(code, detail, { keep: true })
  }
}
