// Connection limits over real mTLS: the server really has the configured timeouts, slow or malformed
// requests are answered in the SPEC's error shape with the security headers, then the connection closes.
import t, { type Test } from 'tap'
import tls from 'node:tls'
import { HSTS_MAX_AGE_SECONDS, captureSecurityHeaders } from '../../src/http/security-headers.js'
import { HTTP_LIMITS } from '../../src/server/http-limits.js'
import { bundle, makePki, request, startTestController, type Identity } from './harness.js'
import { testDir } from '../support/test-dir.js'

const SECURITY_HEADERS = await captureSecurityHeaders()

const root = testDir(t)
const pki = await makePki(root)
const node = await bundle(pki, 'rack1-a', 'node')
const ctl = await startTestController(pki, root)
t.teardown(() => ctl.running.stop())

interface RawReply {
  readonly status: number
  readonly headers: Record<string, string>
  readonly json: any
  /** ms from the first byte sent until the server closed the connection. */
  readonly closedAfterMs: number
}

/** Sends raw bytes on an mTLS connection and reads until the server closes it. */
function raw(id: Identity, bytes: string): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: ctl.port, ca: pki.ca, cert: id.cert, key: id.key })
    const chunks: Buffer[] = []
    let start = 0
    socket.once('secureConnect', () => {
      start = performance.now()
      socket.write(bytes)
    })
    socket.on('data', (c: Buffer) => chunks.push(c))
    socket.on('error', () => undefined) // a reset after the answer is fine; the answer is what we check
    socket.once('close', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const [head = '', body = ''] = text.split('\r\n\r\n')
      const [statusLine = '', ...lines] = head.split('\r\n')
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]))
      let json: unknown
      try {
        json = JSON.parse(body)
      } catch {
        json = undefined
      }
      if (!statusLine) return reject(new Error(`connection closed without an answer after ${Math.round(performance.now() - start)} ms`))
      resolve({ status: Number(statusLine.split(' ')[1]), headers, json, closedAfterMs: performance.now() - start })
    })
  })
}

const hasSecurityHeaders = (t: Test, headers: Record<string, string | string[] | undefined>, what: string) => {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) t.equal(headers[name], value, `${what}: ${name}`)
}

t.test('the HTTPS server carries the configured timeouts (fastify ignores its own with a serverFactory)', async (t) => {
  const server = ctl.running.app.server
  t.equal(server.headersTimeout, HTTP_LIMITS.headersTimeoutMs)
  t.equal(server.requestTimeout, HTTP_LIMITS.requestTimeoutMs)
  t.equal(server.keepAliveTimeout, HTTP_LIMITS.keepAliveTimeoutMs)
  t.equal(server.timeout, HTTP_LIMITS.socketIdleTimeoutMs)
  t.ok(HTTP_LIMITS.socketIdleTimeoutMs > HTTP_LIMITS.keepAliveTimeoutMs, 'keep-alive decides idling')
  t.ok(HTTP_LIMITS.headersTimeoutMs <= HTTP_LIMITS.requestTimeoutMs, 'Node requires headers ≤ request timeout')
})

t.test('a normal answer carries the same security headers as the raw answers below', async (t) => {
  const res = await request(ctl.port, pki.ca, node, '/v1/keys')
  t.equal(res.status, 200)
  hasSecurityHeaders(t, res.headers, 'helmet')
  t.match(res.headers['strict-transport-security'], new RegExp(`max-age=${HSTS_MAX_AGE_SECONDS}`))
})

t.test('malformed HTTP: 400 invalid_request in the SPEC shape, security headers, connection closed', async (t) => {
  const res = await raw(node, 'GARBAGE /\u0000 HTTP/9\r\n\r\n')
  t.equal(res.status, 400)
  t.match(res.json, { error: 'invalid_request', message: /^malformed HTTP request \(HPE_[A-Z_]+\)$/ })
  t.equal(res.headers['content-type'], 'application/json; charset=utf-8')
  hasSecurityHeaders(t, res.headers, 'raw 400')
})

t.test('headers over 8 KiB: 431 headers_too_large', async (t) => {
  const res = await raw(node, `GET /v1/keys HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ${'a'.repeat(HTTP_LIMITS.maxHeaderBytes + 100)}\r\n\r\n`)
  t.equal(res.status, 431)
  t.equal(res.json.error, 'headers_too_large')
  hasSecurityHeaders(t, res.headers, 'raw 431')
})

t.test('slow headers and a slow body: 408 request_timeout and closed, within the limits', async (t) => {
  // Generous: this runs beside every other suite on 2 cores. Node's defaults would be 60 s / 300 s.
  const slack = HTTP_LIMITS.checkIntervalMs + 5000
  const [headers, body] = await Promise.all([
    raw(node, 'GET /v1/keys HTTP/1.1\r\nHost: 127.0.0.1\r\n'),
    raw(node, 'POST /v1/checkin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{'),
  ])
  t.equal(headers.status, 408)
  t.equal(headers.json.error, 'request_timeout')
  hasSecurityHeaders(t, headers.headers, 'raw 408')
  t.ok(headers.closedAfterMs < HTTP_LIMITS.headersTimeoutMs + slack, `slow headers cut after ${Math.round(headers.closedAfterMs)} ms`)
  t.ok(headers.closedAfterMs >= HTTP_LIMITS.headersTimeoutMs - 100, 'not before the header deadline')
  t.equal(body.status, 408)
  t.equal(body.json.error, 'request_timeout')
  t.ok(body.closedAfterMs < HTTP_LIMITS.requestTimeoutMs + slack, `slow body cut after ${Math.round(body.closedAfterMs)} ms`)
  const plan = await request(ctl.port, pki.ca, node, '/v1/keys')
  t.equal(plan.status, 200, 'the controller serves on')
})
