/**
 * pxe-node's metrics listener (`--metrics-port`): plain HTTP serving GET /metrics (Prometheus text) and
 * nothing else (404), reading no request body. Like the controller's ops listener, and built apart from
 * it because the agent never depends on server code: tight timeouts and a small connection cap keep a
 * misbehaving scraper from tying up the node.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import type { Logger } from 'pino'
import type { Registry } from 'prom-client'

/** Limits of the listener: a scraper sends one small GET and waits for the answer. */
export const METRICS_LIMITS = {
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 5_000,
  keepAliveTimeoutMs: 5_000,
  socketIdleTimeoutMs: 10_000,
  checkIntervalMs: 1_000,
  maxHeaderBytes: 4096,
  maxConnections: 8,
} as const

/** The listener could not start; the message names the flag and the cause. */
export class MetricsListenError extends Error {
  override readonly name = 'MetricsListenError'
}

const HEADERS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' } as const

function send(res: ServerResponse, status: number, contentType: string, body: string, close = false): void {
  res.writeHead(status, { ...HEADERS, 'content-type': contentType, 'content-length': String(Buffer.byteLength(body)), ...(close ? { connection: 'close' } : {}) })
  res.end(body)
}

function sendError(res: ServerResponse, status: number, error: string, message: string, close = false): void {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify({ error, message }), close)
}

/** True when the request announces a body (any length but zero, or chunked). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
}

const LISTEN_HINTS: Record<string, string> = {
  EADDRINUSE: 'the port is already in use',
  EACCES: 'permission denied',
  EADDRNOTAVAIL: 'the address is not one of this machine',
  ENOTFOUND: 'the host name does not resolve',
}

/** The listening server; `close` stops it and its connections. */
export class MetricsServer {
  private constructor(private readonly server: http.Server) {}

  /** Listens on host:port (0: a free port); rejects with MetricsListenError when it cannot. */
  static async start(host: string, port: number, registry: Registry, logger?: Logger): Promise<MetricsServer> {
    const server = http.createServer({
      requireHostHeader: false,
      maxHeaderSize: METRICS_LIMITS.maxHeaderBytes,
      headersTimeout: METRICS_LIMITS.headersTimeoutMs,
      requestTimeout: METRICS_LIMITS.requestTimeoutMs,
      keepAliveTimeout: METRICS_LIMITS.keepAliveTimeoutMs,
      connectionsCheckingInterval: METRICS_LIMITS.checkIntervalMs,
    })
    server.maxConnections = METRICS_LIMITS.maxConnections
    server.setTimeout(METRICS_LIMITS.socketIdleTimeoutMs)
    // Malformed HTTP, or headers too large or too slow: nothing to answer, only a connection to end.
    server.on('clientError', (_err, socket: Socket) => socket.destroy())
    server.on('request', (req: IncomingMessage, res: ServerResponse) => handle(req, res, registry, logger))
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) => {
        const cause = err.code === undefined ? err.message : `${err.code}${LISTEN_HINTS[err.code] ? `: ${LISTEN_HINTS[err.code]}` : ''}`
        reject(new MetricsListenError(`--metrics-port: cannot listen on ${host}:${port} (${cause})`))
      })
      server.listen({ host, port }, resolve)
    })
    return new MetricsServer(server)
  }

  /** The address it listens on (the port chosen when 0 was asked for). */
  get address(): { host: string; port: number } {
    const address = this.server.address() as AddressInfo
    return { host: address.address, port: address.port }
  }

  /** Stops listening and closes every connection. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve())
      this.server.closeAllConnections()
    })
  }
}

function handle(req: IncomingMessage, res: ServerResponse, registry: Registry, logger?: Logger): void {
  const path = (req.url ?? '').split('?', 1)[0]
  if (req.method !== 'GET' || path !== '/metrics') return sendError(res, 404, 'not_found', 'this endpoint serves only GET /metrics', hasBody(req))
  // The body is never read: answering and closing is cheaper than draining it.
  if (hasBody(req)) return sendError(res, 413, 'payload_too_large', 'the metrics endpoint accepts no request body', true)
  registry.metrics().then(
    (text) => send(res, 200, registry.contentType, text),
    (err: Error) => {
      logger?.error({ err: err.message }, 'collecting metrics failed')
      sendError(res, 500, 'internal_error', 'internal error')
    },
  )
}
