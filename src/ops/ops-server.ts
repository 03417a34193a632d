/**
 * The operations listener (SPEC "Operations endpoint"): a separate, tiny plain-HTTP server for the
 * machines that watch the controller. It serves GET /metrics, /healthz and /readyz and nothing else
 * (404), reads no request body, changes no state and reveals no secret. Tight timeouts and a small
 * connection cap keep a misbehaving scraper from tying up the process.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import { ERROR_STATUS, type ErrorCode } from '../errors.js'
import { handleClientError } from '../http/client-error.js'
import type { Readiness } from './readiness.js'

/** Limits of the ops listener: scrapers and probes send one small GET and wait for the answer. */
export const OPS_LIMITS = {
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 5_000,
  keepAliveTimeoutMs: 5_000,
  socketIdleTimeoutMs: 10_000,
  checkIntervalMs: 1_000,
  maxHeaderBytes: 4096,
  maxConnections: 16,
} as const

export interface OpsServerDeps {
  /** The Prometheus text of every metric, and its content type. */
  readonly metrics: { text(): Promise<string>; readonly contentType: string }
  readonly readiness: () => Readiness
  readonly logger?: Logger
}

/** The only paths the ops listener serves, GET alone (the API reference documents each one). */
export const OPS_PATHS = ['/metrics', '/healthz', '/readyz'] as const

/** A path of the ops listener. */
export type OpsPath = (typeof OPS_PATHS)[number]

const BASE_HEADERS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' } as const

function send(res: ServerResponse, status: number, contentType: string, body: string, close = false): void {
  res.writeHead(status, {
    ...BASE_HEADERS,
    'content-type': contentType,
    'content-length': String(Buffer.byteLength(body)),
    ...(close ? { connection: 'close' } : {}),
  })
  res.end(body)
}

function sendJson(res: ServerResponse, status: number, value: unknown, close = false): void {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(value), close)
}

function sendError(res: ServerResponse, code: ErrorCode, message: string, close = false): void {
  sendJson(res, ERROR_STATUS[code], { error: code, message }, close)
}

/** True when the request announces a body (any length but zero, or chunked). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
}

/** The plain-HTTP ops server; `start` listens, `close` stops it and its connections. */
export class OpsServer {
  private constructor(
    private readonly server: http.Server,
    private readonly deps: OpsServerDeps,
  ) {}

  /** Listens on host:port (0: a free port); rejects with a message naming `ops` if it cannot. */
  static async start(host: string, port: number, deps: OpsServerDeps): Promise<OpsServer> {
    const server = http.createServer({
      requireHostHeader: false,
      maxHeaderSize: OPS_LIMITS.maxHeaderBytes,
      headersTimeout: OPS_LIMITS.headersTimeoutMs,
      requestTimeout: OPS_LIMITS.requestTimeoutMs,
      keepAliveTimeout: OPS_LIMITS.keepAliveTimeoutMs,
      connectionsCheckingInterval: OPS_LIMITS.checkIntervalMs,
    })
    server.maxConnections = OPS_LIMITS.maxConnections
    server.setTimeout(OPS_LIMITS.socketIdleTimeoutMs)
    server.on('clientError', handleClientError)
    const ops = new OpsServer(server, deps)
    server.on('request', (req: IncomingMessage, res: ServerResponse) => ops.handle(req, res))
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) =>
        reject(new Error(`key "ops": cannot listen on ${host}:${port} (${err.code ?? err.message})`)),
      )
      server.listen({ host, port }, resolve)
    })
    return ops
  }

  /** The port it listens on. */
  get port(): number {
    const address = this.server.address()
    return typeof address === 'object' && address !== null ? address.port : 0
  }

  /** Stops listening and closes every connection. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve())
      this.server.closeAllConnections()
    })
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? '').split('?', 1)[0]
    const route = req.method === 'GET' ? path : undefined
    if (route === undefined || !(OPS_PATHS as readonly string[]).includes(route)) {
      return sendError(res, 'not_found', 'the ops endpoint serves only GET /metrics, /healthz and /readyz', hasBody(req))
    }
    // The body is never read: answering and closing is cheaper than draining it.
    if (hasBody(req)) return sendError(res, 'payload_too_large', 'the ops endpoint accepts no request body', true)
    if (route === '/healthz') return sendJson(res, 200, { status: 'ok' })
    if (route === '/readyz') {
      const { ready, reasons } = this.deps.readiness()
      return ready ? sendJson(res, 200, { status: 'ready' }) : sendJson(res, 503, { status: 'not_ready', reasons })
    }
    this.deps.metrics.text().then(
      (text) => send(res, 200, this.deps.metrics.contentType, text),
      (err: Error) => {
        this.deps.logger?.error({ err: err.message }, 'collecting metrics failed')
        sendError(res, 'internal_error', 'internal error')
      },
    )
  }
}
