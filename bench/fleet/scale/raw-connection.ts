/**
 * A keep-alive mTLS connection that speaks just enough HTTP/1.1 for a check-in: it writes a prebuilt
 * request and reads the status line, Content-Length and body. node:https would cost the load generator
 * about as much CPU as the controller spends per request (see bench/mtls-bench.ts); 10,000 simulated
 * nodes share this machine's two cores with the controller.
 */
import net from 'node:net'
import tls, { type SecureContext, type TLSSocket } from 'node:tls'
import { inspectingStream } from '../../../src/agent/busy-aware-agent.js'
import { takeFrame } from '../../http-frames.js'

/** An answer: the status and the raw body. */
export interface RawReply {
  readonly status: number
  readonly body: Buffer
}

/** Where and how to connect. */
export interface ConnectOptions {
  readonly port: number
  readonly context: SecureContext
  /** The source address (any 127.x.y.z): the controller caps connections per address. */
  readonly localAddress: string
  readonly timeoutMs: number
  /** A TLS session ticket from an earlier connection: resumed as the agent's https.Agent does (its session cache). */
  readonly session?: Buffer | undefined
  /** Told of every session ticket the server hands out, to resume with next time. */
  readonly onSession?: (session: Buffer) => void
}

/** One connection, one request at a time. */
export class RawConnection {
  private buffer: Buffer = Buffer.alloc(0)
  private waiting: { resolve(reply: RawReply): void; reject(err: Error): void } | null = null
  private failure: Error | null = null

  /**
   * `tcpMs`, `tlsMs`: how long this connection took to open (ms), the TCP connection, then the TLS
   * handshake (as the load generator saw them: its own lag included).
   */
  private constructor(
    readonly socket: TLSSocket,
    readonly tcpMs: number,
    readonly tlsMs: number,
  ) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk))
    socket.on('error', (err: Error) => this.fail(err))
    socket.on('close', () => this.fail(Object.assign(new Error('closed by the server'), { code: 'SERVER_CLOSED' })))
  }

  /** True once the connection failed or closed (open a new one). */
  get dead(): boolean {
    return this.failure !== null
  }

  /**
   * Opens a connection (the node's certificate; resumed when `session` is given and still good) to the
   * controller on 127.0.0.1, over the agent's stream that reads a busy controller's appointment before
   * TLS sees any byte (ControllerBusyError). The TLS client is built as soon as TCP is connected: a
   * refused connection (a dead or restarting controller, which is every attempt at a killed HA leader's
   * port) then costs the load generator no TLS client; in a storm a real node spends that on its own
   * CPU, here it came off the two cores the controller runs on.
   *
   * It used to wait one more turn of the loop after the connection, so that a deferred attempt would
   * cost no TLS client either. Counted in a 10,000-node restart: not one of 32,000 attempts had the
   * notice by then (it is read a turn later at the earliest), and in a load generator lagging by
   * seconds that turn alone took a median of 0.4–1.2 s of every attempt.
   */
  static open(opts: ConnectOptions): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const startedAt = performance.now()
      let connectedAt = startedAt
      const raw = net.connect({ host: '127.0.0.1', port: opts.port, localAddress: opts.localAddress, noDelay: true })
      const stream = inspectingStream(raw)
      let socket: TLSSocket | null = null
      const timer = setTimeout(() => (socket ?? stream).destroy(timeoutError(`no TLS handshake within ${opts.timeoutMs} ms`, 'HANDSHAKE_TIMEOUT')), opts.timeoutMs)
      const onError = (err: Error) => {
        clearTimeout(timer)
        reject(err)
      }
      stream.once('error', onError)
      raw.once('connect', () => {
        if (stream.destroyed) return // an error came first: rejected already
        connectedAt = performance.now()
        stream.removeListener('error', onError)
        // host names the server for the identity check (its certificate holds IP 127.0.0.1).
        const tlsSocket = tls.connect({ host: '127.0.0.1', secureContext: opts.context, socket: stream, ...(opts.session ? { session: opts.session } : {}) })
        socket = tlsSocket
        if (opts.onSession) tlsSocket.on('session', opts.onSession)
        tlsSocket.once('secureConnect', () => {
          clearTimeout(timer)
          tlsSocket.removeListener('error', onError)
          resolve(new RawConnection(tlsSocket, connectedAt - startedAt, performance.now() - connectedAt))
        })
        tlsSocket.once('error', onError)
      })
    })
  }

  /** Sends one request; resolves with the answer or rejects (closed, reset, timeout). */
  send(request: Buffer, timeoutMs: number): Promise<RawReply> {
    if (this.failure !== null) return Promise.reject(this.failure)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.fail(timeoutError(`no answer within ${timeoutMs} ms`, 'ANSWER_TIMEOUT'))
        this.socket.destroy()
      }, timeoutMs)
      this.waiting = {
        resolve: (reply) => {
          clearTimeout(timer)
          resolve(reply)
        },
        reject: (err) => {
          clearTimeout(timer)
          reject(err)
        },
      }
      this.socket.write(request)
    })
  }

  /** Closes the connection. */
  close(): void {
    this.failure ??= new Error('closed')
    this.socket.destroy()
  }

  private fail(err: Error): void {
    this.failure ??= err
    const waiter = this.waiting
    this.waiting = null
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
    this.waiting = null
    waiter?.resolve({ status: frame.status, body: frame.body })
  }
}

/** A time-out, with a code that the load generator's counters tell apart (error_HANDSHAKE_TIMEOUT ...). */
function timeoutError(message: string, code: 'HANDSHAKE_TIMEOUT' | 'ANSWER_TIMEOUT'): Error {
  return Object.assign(new Error(message), { code })
}
