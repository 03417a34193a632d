/**
 * A keep-alive mTLS connection that speaks just enough HTTP/1.1 for a check-in: it writes a prebuilt
 * request and reads the status line, Content-Length and body. node:https would cost the load generator
 * about as much CPU as the controller spends per request (see bench/mtls-bench.ts); 10,000 simulated
 * nodes share this machine's two cores with the controller.
 */
import type { SecureContext, TLSSocket } from 'node:tls'
import { connectBusyAware } from '../../../src/agent/busy-aware-agent.js'
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

  private constructor(readonly socket: TLSSocket) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk))
    socket.on('error', (err: Error) => this.fail(err))
    socket.on('close', () => this.fail(new Error('closed by the server')))
  }

  /** True once the connection failed or closed (open a new one). */
  get dead(): boolean {
    return this.failure !== null
  }

  /** Opens a connection (the node's certificate; resumed when `session` is given and still good) to the controller on 127.0.0.1. */
  static open(opts: ConnectOptions): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      // As the agent does: TLS over a stream that reads a busy controller's appointment (ControllerBusyError).
      // host names the server for the identity check (its certificate holds IP 127.0.0.1).
      const tcp = { host: '127.0.0.1', port: opts.port, localAddress: opts.localAddress }
      const socket = connectBusyAware(tcp, { host: '127.0.0.1', secureContext: opts.context, ...(opts.session ? { session: opts.session } : {}) })
      if (opts.onSession) socket.on('session', opts.onSession)
      const timer = setTimeout(() => socket.destroy(new Error(`no TLS handshake within ${opts.timeoutMs} ms`)), opts.timeoutMs)
      socket.setNoDelay(true)
      socket.once('secureConnect', () => {
        clearTimeout(timer)
        socket.removeListener('error', onError)
        resolve(new RawConnection(socket))
      })
      const onError = (err: Error) => {
        clearTimeout(timer)
        reject(err)
      }
      socket.once('error', onError)
    })
  }

  /** Sends one request; resolves with the answer or rejects (closed, reset, timeout). */
  send(request: Buffer, timeoutMs: number): Promise<RawReply> {
    if (this.failure !== null) return Promise.reject(this.failure)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.fail(new Error(`no answer within ${timeoutMs} ms`))
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
