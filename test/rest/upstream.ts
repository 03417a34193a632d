/** A tiny stand-in for Discord's API for the proxy's tests: records each request and answers as told. */
import http, { type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import { pino, type Logger } from 'pino'

/** One request as the stand-in saw it. */
export interface SeenRequest {
  readonly at: number
  readonly method: string
  readonly url: string
  readonly headers: IncomingHttpHeaders
  readonly body: string
}

/** What the stand-in answers. */
export interface Answer {
  readonly status: number
  readonly headers?: Record<string, string>
  readonly body?: unknown
}

export interface Upstream {
  readonly api: string
  readonly seen: SeenRequest[]
  close(): Promise<void>
}

/** Starts the stand-in on 127.0.0.1; `answer` decides each answer (default 200 {ok: true}). */
export async function startUpstream(answer: (req: SeenRequest) => Answer = () => ({ status: 200, body: { ok: true } })): Promise<Upstream> {
  const seen: SeenRequest[] = []
  const server = http.createServer((req, res) => {
    let body = ''
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')))
    req.on('end', () => {
      const request = { at: performance.now(), method: req.method ?? '', url: req.url ?? '', headers: req.headers, body }
      seen.push(request)
      const a = answer(request)
      const text = a.body === undefined ? '' : JSON.stringify(a.body)
      res.writeHead(a.status, { ...(text === '' ? {} : { 'content-type': 'application/json' }), ...a.headers }).end(text)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  return {
    api: `http://127.0.0.1:${port}/api`,
    seen,
    close: () => new Promise((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}

/** A pino logger writing into `lines` (every level), to check what was logged. */
export function capturingLogger(lines: string[]): Logger {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean))
      done()
    },
  })
  return pino({ level: 'trace' }, sink)
}

/** A request to the proxy with fetch: status, headers, parsed body. */
export async function call(url: string, init: RequestInit = {}): Promise<{ status: number; headers: Headers; body: unknown }> {
  const res = await fetch(url, init)
  const text = await res.text()
  let body: unknown = text
  try {
    body = JSON.parse(text)
  } catch {
    // not JSON
  }
  return { status: res.status, headers: res.headers, body }
}
