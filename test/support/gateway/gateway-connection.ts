/**
 * One gateway WebSocket connection: HELLO, the heartbeat deadline, the send rate limit, decoding,
 * and which opcodes are allowed before authentication. IDENTIFY and RESUME go to the emulator (the
 * rules there span connections); everything about this one socket is decided here.
 */
import type { WebSocket } from 'ws'
import { CLIENT_OPS, Close, MAX_CLIENT_PAYLOAD_BYTES, Op } from './gateway-codes.js'
import type { DispatchSink, EmulatedSession } from './emulated-session.js'
import type { ResolvedOptions } from './emulator-options.js'
import type { Breach } from './emulator-records.js'
import { ZlibStreamEncoder } from './zlib-stream.js'

/** What happens to the connection's session when the server closes it. */
export type SessionFate = { readonly keep: true } | { readonly keep: false; readonly reason: string }

/** The emulator, as a connection sees it. */
export interface ConnectionHost {
  readonly options: ResolvedOptions
  /** Milliseconds since the emulator started. */
  elapsed(): number
  record(breach: Breach): void
  onIdentify(connection: GatewayConnection, d: unknown): void
  onResume(connection: GatewayConnection, d: unknown): void
  /** The server is closing the connection: settle its session now (it is no longer live). */
  onServerClose(connection: GatewayConnection, fate: SessionFate): void
  /** The socket is gone; `code` is the client's close code (1006 for a dropped socket). */
  onClosed(connection: GatewayConnection, code: number): void
}

/** A picture of a connection for tests. */
export interface ConnectionView {
  readonly id: number
  readonly via: 'gateway' | 'resume'
  readonly open: boolean
  readonly authenticated: boolean
  readonly shardId: number | null
  readonly numShards: number | null
  readonly sessionId: string | null
  readonly compressed: boolean
}

export class GatewayConnection implements DispatchSink {
  /** The session this connection identified or resumed, while it serves it. */
  session: EmulatedSession | null = null
  /** Set by the `withholdAcks` hook: heartbeats go unanswered, so the client should see a zombie. */
  withholdAcks = false
  private closing = false
  private socketOpen = true
  private heartbeatTimer: NodeJS.Timeout | null = null
  private lastBeatAt: number
  private windowStart: number
  private sentInWindow = 0
  private readonly encoder: ZlibStreamEncoder | null

  constructor(
    readonly id: number,
    readonly via: 'gateway' | 'resume',
    private readonly socket: WebSocket,
    private readonly host: ConnectionHost,
    compress: boolean,
  ) {
    this.encoder = compress ? new ZlibStreamEncoder((message) => this.rawSend(message)) : null
    this.lastBeatAt = host.elapsed()
    this.windowStart = host.elapsed()
    socket.on('message', (data: Buffer) => this.onMessage(data))
    socket.on('error', () => undefined)
    socket.on('close', (code: number) => {
      this.socketOpen = false
      this.stopHeartbeatClock()
      this.encoder?.close()
      this.host.onClosed(this, code)
    })
  }

  /** Sends HELLO and starts the heartbeat clock. */
  hello(): void {
    this.sendPayload({ op: Op.Hello, d: { heartbeat_interval: this.host.options.heartbeatIntervalMs }, s: null, t: null })
    this.armHeartbeatClock()
  }

  /** Open for messages: not closing, and (ws turns CLOSING on the client's close frame, before 'close') OPEN. */
  get open(): boolean {
    return this.socketOpen && !this.closing && this.socket.readyState === this.socket.OPEN
  }

  /** Authenticated and open: the connection serves a session. */
  get live(): boolean {
    return this.open && this.session !== null
  }

  sendText(json: string): boolean {
    if (!this.open) return false
    if (this.encoder) this.encoder.push(json)
    else this.rawSend(json)
    return true
  }

  sendPayload(payload: object): void {
    this.sendText(JSON.stringify(payload))
  }

  /** Sends op 9 INVALID_SESSION; the connection stays open and unauthenticated (the client may IDENTIFY again). */
  invalidSession(resumable: boolean): void {
    this.sendPayload({ op: Op.InvalidSession, d: resumable, s: null, t: null })
  }

  /** Closes with `code`, after anything already queued; the session's fate is settled at once. */
  close(code: number, reason: string, fate: SessionFate): void {
    if (!this.open) return
    this.closing = true
    this.stopHeartbeatClock()
    this.host.onServerClose(this, fate)
    const send = () => this.socket.close(code, reason.slice(0, 120))
    if (this.encoder) this.encoder.then(send)
    else send()
  }

  /** Records a protocol breach and closes with its code (the session stays resumable, as Discord's do). */
  refuse(code: number, detail: string, fate: SessionFate = { keep: true }): void {
    this.host.record({
      kind: 'protocol',
      at: this.host.elapsed(),
      connectionId: this.id,
      closeCode: code,
      shardId: this.session?.shardId ?? null,
      sessionId: this.session?.id ?? null,
      detail,
    })
    this.close(code, detail, fate)
  }

  /** Drops the TCP connection without a close frame (a network failure, as the client sees it). */
  drop(): void {
    if (!this.open) return
    this.closing = true
    this.stopHeartbeatClock()
    this.host.onServerClose(this, { keep: true })
    this.socket.terminate()
  }

  view(): ConnectionView {
    return {
      id: this.id,
      via: this.via,
      open: this.open,
      authenticated: this.session !== null,
      shardId: this.session?.shardId ?? null,
      numShards: this.session?.numShards ?? null,
      sessionId: this.session?.id ?? null,
      compressed: this.encoder !== null,
    }
  }

  private rawSend(data: string | Buffer): void {
    if (this.socketOpen) this.socket.send(data)
  }

  private onMessage(data: Buffer): void {
    if (!this.open) return
    if (!this.withinSendLimit()) return
    if (data.length > MAX_CLIENT_PAYLOAD_BYTES) {
      this.refuse(Close.DecodeError, `payload of ${data.length} bytes (at most ${MAX_CLIENT_PAYLOAD_BYTES})`)
      return
    }
    let payload: unknown
    try {
      payload = JSON.parse(data.toString('utf8'))
    } catch {
      this.refuse(Close.DecodeError, 'payload is not JSON')
      return
    }
    if (typeof payload !== 'object' || payload === null || !Number.isInteger((payload as { op?: unknown }).op)) {
      this.refuse(Close.DecodeError, 'payload is not an object with an integer op')
      return
    }
    const { op, d } = payload as { op: number; d?: unknown }
    if (!CLIENT_OPS.has(op)) {
      this.refuse(Close.UnknownOpcode, `unknown opcode ${op}`)
      return
    }
    this.handle(op, d)
  }

  private handle(op: number, d: unknown): void {
    switch (op) {
      case Op.Heartbeat:
        if (d !== null && d !== undefined && !(Number.isInteger(d) && (d as number) >= 0)) {
          this.refuse(Close.UnknownOpcode, 'heartbeat d must be the last sequence number or null')
          return
        }
        this.lastBeatAt = this.host.elapsed()
        this.armHeartbeatClock()
        if (!this.withholdAcks) this.sendPayload({ op: Op.HeartbeatAck, d: null, s: null, t: null })
        return
      case Op.Identify:
        this.host.onIdentify(this, d)
        return
      case Op.Resume:
        this.host.onResume(this, d)
        return
      default:
        // Presence, voice state, member requests: accepted without an answer once authenticated.
        if (this.session === null) this.refuse(Close.NotAuthenticated, `opcode ${op} before IDENTIFY or RESUME`)
    }
  }

  /** Discord: 120 payloads per connection per 60 s, "immediately disconnected" past it. A fixed window from the open. */
  private withinSendLimit(): boolean {
    const now = this.host.elapsed()
    const { count, windowMs } = this.host.options.sendLimit
    if (now - this.windowStart >= windowMs) {
      this.windowStart = now
      this.sentInWindow = 0
    }
    this.sentInWindow++
    if (this.sentInWindow <= count) return true
    this.host.record({
      kind: 'send_rate_limit',
      at: now,
      connectionId: this.id,
      shardId: this.session?.shardId ?? null,
      sessionId: this.session?.id ?? null,
      sent: this.sentInWindow,
      detail: `${this.sentInWindow} payloads within ${windowMs} ms (limit ${count})`,
    })
    this.close(Close.RateLimited, 'rate limited', { keep: true })
    return false
  }

  private armHeartbeatClock(): void {
    this.stopHeartbeatClock()
    const { heartbeatIntervalMs, heartbeatGraceMs } = this.host.options
    this.heartbeatTimer = setTimeout(() => this.heartbeatMissed(), heartbeatIntervalMs + heartbeatGraceMs)
    this.heartbeatTimer.unref()
  }

  private stopHeartbeatClock(): void {
    if (this.heartbeatTimer) clearTimeout(this.heartbeatTimer)
    this.heartbeatTimer = null
  }

  /**
   * "If your app fails to send a heartbeat event in time, your connection will be closed and you will be
   * forced to Resume": the session stays resumable. The close code is undocumented; 4009 "Session timed
   * out" is the closest, and @discordjs/ws resumes on it.
   */
  private heartbeatMissed(): void {
    const waitedMs = this.host.elapsed() - this.lastBeatAt
    this.host.record({
      kind: 'heartbeat_miss',
      at: this.host.elapsed(),
      connectionId: this.id,
      shardId: this.session?.shardId ?? null,
      sessionId: this.session?.id ?? null,
      waitedMs,
      detail: `no heartbeat for ${waitedMs} ms (interval ${this.host.options.heartbeatIntervalMs} ms)`,
    })
    this.close(Close.SessionTimedOut, 'heartbeat missed', { keep: true })
  }
}
