/**
 * fastify's clientErrorHandler: the answer to a request Node's HTTP parser refused before any route ran
 * (malformed HTTP, headers too large, headers or body too slow). Same `{error, message}` shape and the
 * same security headers as every other answer, instead of fastify's default body; then the connection closes.
 */
import { STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import { ERROR_STATUS, type ErrorCode } from '../errors.js'
import { HTTP_LIMITS } from '../server/http-limits.js'
import { securityHeaders } from './security-headers.js'

function classify(err: NodeJS.ErrnoException): { code: ErrorCode; message: string } {
  switch (err.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { code: 'request_timeout', message: 'the request did not arrive in time' }
    case 'HPE_HEADER_OVERFLOW':
      return { code: 'headers_too_large', message: `the request headers are larger than ${HTTP_LIMITS.maxHeaderBytes} bytes` }
    default:
      // The parser's own code says what was wrong (HPE_INVALID_METHOD, HPE_INVALID_EOF_STATE, …).
      return { code: 'invalid_request', message: `malformed HTTP request (${err.code ?? 'unknown'})` }
  }
}

/**
 * Whether the error is about the request's bytes (Node's HTTP parser, its timeouts): those get an
 * answer. Node hands the same hook every other error of the socket too (EPIPE, ETIMEDOUT, a TLS
 * alert): there is no request to answer then, and a "malformed HTTP request" would blame the client
 * for a connection that failed.
 */
function aboutTheRequest(err: NodeJS.ErrnoException): boolean {
  return typeof err.code === 'string' && (err.code.startsWith('HPE_') || err.code === 'ERR_HTTP_REQUEST_TIMEOUT')
}

/** The raw HTTP/1.1 answer for a refused request. */
export function clientErrorResponse(err: NodeJS.ErrnoException): string {
  const { code, message } = classify(err)
  const status = ERROR_STATUS[code]
  const body = JSON.stringify({ error: code, message })
  const headers = {
    ...securityHeaders(),
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    connection: 'close',
  }
  const head = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${head}\r\n${body}`
}

/** Answers (when the socket can still take it) and closes the connection. */
export function handleClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  // A reset connection, or one already gone, has nobody left to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  // As Node's own handler: once a response has started on this socket, another one would corrupt it.
  const current = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage
  if (!aboutTheRequest(err) || !socket.writable || current?.headersSent) {
    socket.destroy()
    return
  }
  // end() lets the answer flush through TLS; a peer that does not read it is cut off shortly after.
  socket.end(clientErrorResponse(err))
  setTimeout(() => socket.destroy(), 1000).unref()
}
