/**
 * The mTLS bench's load generator side: raw TLS sockets writing prebuilt HTTP/1.1 requests and reading
 * only the status line and Content-Length. A generator built on node:https would cost about as much CPU
 * as the servers and would flatten every ratio towards 1.
 */
import tls, { type SecureContext, type TLSSocket } from 'node:tls'
import { takeFrame } from './http-frames.js'
import { BENCH_CAPACITY } from './mtls-shared.js'

/** A node identity the generator presents. */
export interface Identity {
  readonly name: string
  readonly cert: Buffer
  readonly key: Buffer
}

/** `promise`, or a rejection with `message` once `ms` pass without it settling: a stalled target stops a bench instead of hanging it. */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** A reply: status, body and the latency in ms. */
export interface Reply {
  readonly status: number
  readonly body: Buffer
  readonly ms: number
}

/** The request bytes a node sends on every check-in. */
export function checkinRequest(name: string, generation: number | undefined): Buffer {
  const body = JSON.stringify({ node_id: name, capacity: BENCH_CAPACITY, ready_shards: 32, starting_shards: 0, backoff_shards: 0, fatal_shards: 0, ...(generation === undefined ? {} : { generation }) })
  return Buffer.from(`POST /v1/checkin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, 'latin1')
}

/** One secure context per identity (the bench has one CA): built per connection, it would parse the PEM key every time and make the generator the bottleneck. */
const contexts = new WeakMap<Identity, SecureContext>()

function contextOf(id: Identity, ca: Buffer): SecureContext {
  let context = contexts.get(id)
  if (context === undefined) {
    context = tls.createSecureContext({ ca, cert: id.cert, key: id.key })
    contexts.set(id, context)
  }
  return context
}

/** A keep-alive connection with one request in flight at a time (a closed loop, as a node behaves). */
export class Connection {
  private buffer: Buffer = Buffer.alloc(0)
  private sentAt = 0
  private waiting: { resolve(reply: { status: number; body: Buffer }): void; reject(err: Error): void } | undefined
  private failure: Error | undefined
  /** Whether the handshake resumed a session. */
  readonly reused: boolean
  /** The newest session ticket the server sent on this connection (TLS 1.3 sends none after a resumption). */
  session: Buffer | undefined

  private constructor(readonly socket: TLSSocket) {
    this.reused = socket.isSessionReused()
    socket.on('data', (chunk: Buffer) => this.onData(chunk))
    socket.on('error', (err: Error) => this.fail(err))
    socket.on('close', () => this.fail(new Error('connection closed by the server')))
  }

  /** Connects and completes the handshake, offering `session` for resumption when given. */
  static open(port: number, ca: Buffer, id: Identity, session?: Buffer): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = tls.connect({ host: '127.0.0.1', port, secureContext: contextOf(id, ca), ...(session ? { session } : {}) })
      socket.setNoDelay(true)
      let latest: Buffer | undefined
      const early = (s: Buffer) => (latest = s)
      socket.on('session', early)
      socket.once('secureConnect', () => {
        socket.removeListener('error', reject)
        socket.removeListener('session', early)
        const connection = new Connection(socket)
        connection.session = latest
        socket.on('session', (s: Buffer) => (connection.session = s))
        resolve(connection)
      })
      socket.once('error', reject)
    })
  }

  /** Sends one request and resolves with the status and body (and the latency in ms). */
  send(request: Buffer): Promise<Reply> {
    if (this.failure) return Promise.reject(this.failure)
    return new Promise((resolve, reject) => {
      this.sentAt = performance.now()
      this.waiting = { resolve: ({ status, body }) => resolve({ status, body, ms: performance.now() - this.sentAt }), reject }
      this.socket.write(request)
    })
  }

  /** Closes the connection gracefully (close_notify, FIN) and waits until both sides are done. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      if (this.socket.destroyed) return resolve()
      this.socket.once('close', () => resolve())
      this.socket.end()
    })
  }

  /** A request in flight on a dead connection fails instead of hanging the round. */
  private fail(err: Error): void {
    this.failure ??= err
    const waiter = this.waiting
    this.waiting = undefined
    waiter?.reject(this.failure)
  }

  private onData(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk])
    const frame = takeFrame(this.buffer)
    if (frame === null) return
    if (frame instanceof Error) {
      this.fail(frame)
      this.socket.destroy()
      return
    }
    this.buffer = frame.rest
    const waiter = this.waiting
    this.waiting = undefined
    waiter?.resolve({ status: frame.status, body: frame.body })
  }
}

/** One connection per identity, opened at once. */
export function openAll(port: number, ca: Buffer, ids: readonly Identity[]): Promise<Connection[]> {
  return Promise.all(ids.map((id) => Connection.open(port, ca, id)))
}

/** Drops every connection at once (the end of a round). */
export function closeAll(connections: readonly Connection[]): void {
  for (const c of connections) c.socket.destroy()
}
