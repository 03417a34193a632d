/**
 * HTTPS client of the controllers' enrollment listeners (`--enroll URL[,URL]`): TLS that trusts only the
 * CA the node was given (--ca-file; never the system store) and presents no certificate. One request
 * tries the URLs in order from the last one that answered, moving on at a connection error, a timeout or
 * a 503 (an HA follower answers `not_leader`); anything else is an answer. Bodies never hold the token's
 * secret (only its id and the proof), and errors never repeat a body.
 */
import https from 'node:https'
import { errorReplySchema } from './wire.js'

/** One answer of an enrollment listener. */
export interface EnrollReply {
  readonly status: number
  /** The parsed JSON body, or undefined. */
  readonly body: unknown
  readonly errorCode: string | null
  readonly errorMessage: string | null
  /** From `retry_after_ms` (429), else null. */
  readonly retryAfterMs: number | null
  readonly url: string
}

/** No enrollment URL answered; `attempts` say why for each. */
export class EnrollUnreachableError extends Error {
  override readonly name = 'EnrollUnreachableError'
  constructor(readonly attempts: readonly string[]) {
    super(`no enrollment listener answered: ${attempts.join('; ')}`)
  }
}

const MAX_BODY_BYTES = 64 * 1024
/** TLS failures that say the listener is not the controller the CA vouches for. */
const UNTRUSTED = /^(ERR_TLS_CERT_ALTNAME_INVALID|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|CERT_|ERR_TLS_CERT)/

/** Talks to the enrollment URLs in order, sticking to the last one that answered. */
export class EnrollClient {
  private readonly urls: readonly string[]
  private first = 0
  private readonly agent: https.Agent

  constructor(urls: readonly string[], private readonly ca: string, private readonly timeoutMs = 10_000) {
    if (urls.length === 0) throw new Error('at least one enrollment URL is required')
    this.urls = urls.map((u) => new URL(u).origin)
    this.agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca, minVersion: 'TLSv1.2' })
  }

  /** The URL in use (the last one that answered). */
  get currentUrl(): string {
    return this.urls[this.first]!
  }

  /** POSTs JSON (`body`) or GETs (undefined), failing over as the module comment says. */
  async request(path: string, body?: unknown): Promise<EnrollReply> {
    const failures: string[] = []
    for (let i = 0; i < this.urls.length; i++) {
      const index = (this.first + i) % this.urls.length
      const url = this.urls[index]!
      try {
        const reply = await this.send(url, path, body)
        if (reply.status === 503) {
          failures.push(`${url} 503 ${reply.errorCode ?? ''}`.trim())
          continue
        }
        this.first = index
        return reply
      } catch (err) {
        failures.push(`${url} ${(err as Error).message}`)
      }
    }
    throw new EnrollUnreachableError(failures)
  }

  /** Closes the kept-alive connections. */
  close(): void {
    this.agent.destroy()
  }

  private send(url: string, path: string, body: unknown): Promise<EnrollReply> {
    const payload = body === undefined ? null : JSON.stringify(body)
    return new Promise((resolve, reject) => {
      const req = https.request(new URL(path, url), {
        method: payload === null ? 'GET' : 'POST',
        agent: this.agent,
        timeout: this.timeoutMs,
        headers: payload === null ? { accept: 'application/json' } : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), accept: 'application/json' },
      })
      req.on('timeout', () => req.destroy(Object.assign(new Error(`no answer within ${this.timeoutMs} ms`), { code: 'timeout' })))
      req.on('error', (err: NodeJS.ErrnoException) => {
        const code = err.code ?? ''
        reject(new Error(UNTRUSTED.test(code) ? `the listener's certificate is not trusted by the CA file (${code})` : code || err.message.slice(0, 80)))
      })
      req.on('response', (res) => {
        const chunks: Buffer[] = []
        let size = 0
        res.on('data', (chunk: Buffer) => {
          size += chunk.length
          if (size > MAX_BODY_BYTES) req.destroy(new Error('the answer is too large'))
          else chunks.push(chunk)
        })
        res.on('error', reject)
        res.on('end', () => resolve(replyOf(url, res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'))))
      })
      if (payload === null) req.end()
      else req.end(payload)
    })
  }
}

function replyOf(url: string, status: number, text: string): EnrollReply {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  const error = status >= 400 ? errorReplySchema.safeParse(body) : null
  const ok = error?.success === true ? error.data : null
  return {
    status,
    body,
    errorCode: ok?.error ?? null,
    errorMessage: ok === null ? null : ok.message.slice(0, 200),
    retryAfterMs: status === 429 ? (ok?.retry_after_ms ?? 1000) : null,
    url,
  }
}
