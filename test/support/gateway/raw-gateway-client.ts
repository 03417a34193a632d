/**
 * A bare gateway client for the emulator's own tests: it sends exactly what a test tells it to (so a
 * test can break each rule on purpose) and keeps every payload it got, in order.
 */
import { WebSocket } from 'ws'

/** A payload from the gateway. */
export interface GatewayPayload {
  readonly op: number
  readonly d: unknown
  readonly s: number | null
  readonly t: string | null
}

export class RawGatewayClient {
  /** Everything received, oldest first. */
  readonly received: GatewayPayload[] = []
  /** The close code and reason, once closed. */
  readonly closed: Promise<{ code: number; reason: string }>
  /** The highest dispatch sequence received. */
  lastSeq: number | null = null
  private cursor = 0
  private wake: (() => void) | null = null
  private beat: NodeJS.Timeout | null = null

  private constructor(
    private readonly socket: WebSocket,
    autoHeartbeat: boolean,
  ) {
    this.closed = new Promise((resolve) => {
      socket.on('close', (code, reason) => {
        if (this.beat) clearInterval(this.beat)
        this.wake?.()
        resolve({ code, reason: reason.toString() })
      })
    })
    socket.on('error', () => undefined)
    socket.on('message', (data: Buffer) => {
      const payload = JSON.parse(data.toString('utf8')) as GatewayPayload
      if (payload.op === 0 && payload.s !== null && (this.lastSeq === null || payload.s > this.lastSeq)) this.lastSeq = payload.s
      if (payload.op === 10 && autoHeartbeat) {
        const interval = (payload.d as { heartbeat_interval: number }).heartbeat_interval
        this.beat = setInterval(() => this.heartbeat(), interval)
        this.beat.unref()
      }
      this.received.push(payload)
      this.wake?.()
    })
  }

  /** Opens `url` with `query` (default `v=10&encoding=json`); heartbeats by itself unless told not to. */
  static async connect(url: string, options: { query?: string; autoHeartbeat?: boolean } = {}): Promise<RawGatewayClient> {
    const socket = new WebSocket(`${url}?${options.query ?? 'v=10&encoding=json'}`)
    const client = new RawGatewayClient(socket, options.autoHeartbeat ?? true)
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve())
      socket.once('error', reject)
    })
    return client
  }

  /** The next payload (after the last one `next` returned) that matches; rejects after `timeoutMs` or on close. */
  async next(match: (p: GatewayPayload) => boolean = () => true, timeoutMs = 5000): Promise<GatewayPayload> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      while (this.cursor < this.received.length) {
        const p = this.received[this.cursor++] as GatewayPayload
        if (match(p)) return p
      }
      if (this.socket.readyState === WebSocket.CLOSED) throw new Error('connection closed before the payload came')
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`no matching payload within ${timeoutMs} ms`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.wake = () => {
          clearTimeout(timer)
          resolve()
        }
      })
    }
  }

  /** The next dispatch named `t`. */
  dispatch(t: string, timeoutMs?: number): Promise<GatewayPayload> {
    return this.next((p) => p.op === 0 && p.t === t, timeoutMs)
  }

  send(payload: { op: number; d: unknown }): void {
    this.socket.send(JSON.stringify(payload))
  }

  sendRaw(text: string): void {
    this.socket.send(text)
  }

  heartbeat(): void {
    if (this.socket.readyState === WebSocket.OPEN) this.send({ op: 1, d: this.lastSeq })
  }

  identify(options: { token: string; shard?: [number, number]; intents?: number }): void {
    const d = {
      token: options.token,
      intents: options.intents ?? 0,
      properties: { os: 'linux', browser: 'raw-test', device: 'raw-test' },
      ...(options.shard ? { shard: options.shard } : {}),
    }
    this.send({ op: 2, d })
  }

  resume(options: { token: string; sessionId: string; seq: number | null }): void {
    this.send({ op: 6, d: { token: options.token, session_id: options.sessionId, seq: options.seq } })
  }

  /** Closes with `code` and waits for the close to finish. */
  async close(code = 1000): Promise<{ code: number; reason: string }> {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.close(code)
    return this.closed
  }

  /** Drops the socket without a close frame. */
  async terminate(): Promise<void> {
    this.socket.terminate()
    await this.closed
  }
}
