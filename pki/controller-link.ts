/**
 * The CA host's line to the controllers (the signer and `enroll list|approve|deny`): HTTPS with a signer
 * bundle, trusting only the bundle's ca.pem, over the controllers in order. The signer connects out and
 * listens on nothing. A connection error, a timeout or a 503 (`not_leader` from an HA follower,
 * `unavailable` from a leader that lost etcd) moves on to the next controller; any other answer is the
 * answer, and the controller that gave it is asked first next time. Nothing here prints key material.
 */
import https from 'node:https'
import { PkiError, UsageError } from './errors.js'
import { printable } from './serial.js'

/** The most of an answer read (500 pending requests of 16 KiB each fit in 8 MiB). */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024
export const DEFAULT_LINK_TIMEOUT_MS = 10_000

/** The PEM material of the signer's client identity. */
export interface LinkIdentity {
  readonly cert: string
  /** Never printed or logged. */
  readonly key: string
  /** The only certificate trusted for the controllers. */
  readonly ca: string
}

/** One controller's answer. */
export interface LinkAnswer {
  readonly status: number
  readonly json: unknown
  readonly text: string
  readonly controller: string
}

/** No controller gave an answer (every one unreachable, timed out or 503). */
export class NoControllerError extends PkiError {
  constructor(readonly attempts: readonly string[], what: string) {
    super(`no controller answered ${what}: ${attempts.join('; ')}`)
    this.name = 'NoControllerError'
  }
}

class TransportError extends Error {}

/** Checks `--controller URL[,URL]`: https URLs with a host and no path, query or credentials. */
export function parseControllerUrls(values: readonly string[]): string[] {
  if (values.length === 0) throw new UsageError('missing --controller URL (the controllers, e.g. https://controller.lan:8443)')
  return values.map((value) => {
    let url: URL
    try {
      url = new URL(value)
    } catch {
      throw new UsageError(`invalid --controller "${printable(value)}": not a URL (e.g. https://controller.lan:8443)`)
    }
    if (url.protocol !== 'https:') throw new UsageError(`invalid --controller "${printable(value)}": the controllers speak https only`)
    if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '' || (url.pathname !== '/' && url.pathname !== '')) {
      throw new UsageError(`invalid --controller "${printable(value)}": give only https://HOST:PORT`)
    }
    return url.origin
  })
}

/** A connection failure in words an operator can act on. */
export function describeFailure(err: Error & { code?: string }): string {
  const code = err.code ?? ''
  if (err instanceof TransportError) return err.message
  if (code === 'ECONNREFUSED') return 'connection refused'
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host name not found'
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'host unreachable'
  if (['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'CERT_SIGNATURE_FAILURE'].includes(code)) {
    return `TLS: the controller's certificate is not signed by the bundle's ca.pem (${code})`
  }
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return `TLS: the controller's certificate does not name this host (${code})`
  if (/ALERT/.test(code)) return `TLS: the controller refused the signer certificate in the handshake (${code}); is it revoked or expired?`
  if (code === 'ECONNRESET' || code === 'EPIPE') return 'the connection was closed by the controller'
  return `${err.message.slice(0, 200)}${code ? ` (${code})` : ''}`
}

/** The controllers, asked in order, over kept-alive connections. */
export class ControllerLink {
  private preferred = 0
  private readonly agent: https.Agent

  constructor(
    private readonly controllers: readonly string[],
    identity: LinkIdentity,
    private readonly timeoutMs = DEFAULT_LINK_TIMEOUT_MS,
  ) {
    // One connection per controller, kept between passes: a pass of 500 answers costs one handshake.
    this.agent = new https.Agent({ keepAlive: true, maxSockets: 4, cert: identity.cert, key: identity.key, ca: identity.ca })
  }

  /** Sends one request, failing over as the module doc says; throws NoControllerError when no controller answers. */
  async request(method: string, path: string, body?: { contentType: string; data: string }): Promise<LinkAnswer> {
    const skipped: string[] = []
    for (let i = 0; i < this.controllers.length; i++) {
      const at = (this.preferred + i) % this.controllers.length
      const base = this.controllers[at]!
      let answer: LinkAnswer
      try {
        answer = await this.onceRetryingStale(base, method, path, body)
      } catch (err) {
        skipped.push(`${base}: ${describeFailure(err as Error)}`)
        continue
      }
      if (answer.status === 503) {
        skipped.push(`${base}: 503 ${errorCode(answer.json) ?? 'unavailable'}`)
        continue
      }
      this.preferred = at
      return answer
    }
    throw new NoControllerError(skipped, `${method} ${path}`)
  }

  /** Closes the kept-alive connections (the process can then end). */
  close(): void {
    this.agent.destroy()
  }

  /** A kept-alive connection the controller closed meanwhile is retried once on a new one. */
  private async onceRetryingStale(base: string, method: string, path: string, body: { contentType: string; data: string } | undefined): Promise<LinkAnswer> {
    try {
      return await this.once(base, method, path, body)
    } catch (err) {
      if (!(err as { reused?: boolean }).reused) throw err
      return this.once(base, method, path, body)
    }
  }

  private once(base: string, method: string, path: string, body: { contentType: string; data: string } | undefined): Promise<LinkAnswer> {
    const headers: Record<string, string | number> = { accept: 'application/json' }
    if (body !== undefined) {
      headers['content-type'] = body.contentType
      headers['content-length'] = Buffer.byteLength(body.data)
    }
    return new Promise((resolve, reject) => {
      const req = https.request(new URL(path, base), { method, headers, agent: this.agent })
      const fail = (err: Error) => {
        clearTimeout(timer)
        reject(Object.assign(err, { reused: req.reusedSocket && !(err instanceof TransportError) }))
      }
      const timer = setTimeout(() => req.destroy(new TransportError(`no answer within ${this.timeoutMs / 1000} s`)), this.timeoutMs)
      req.on('response', (res) => {
        const chunks: Buffer[] = []
        let size = 0
        res.on('data', (chunk: Buffer) => {
          size += chunk.length
          if (size > MAX_ANSWER_BYTES) req.destroy(new TransportError(`the answer is larger than ${MAX_ANSWER_BYTES} bytes`))
          else chunks.push(chunk)
        })
        res.on('end', () => {
          clearTimeout(timer)
          const text = Buffer.concat(chunks).toString('utf8')
          let json: unknown
          try {
            json = JSON.parse(text)
          } catch {
            json = undefined
          }
          resolve({ status: res.statusCode ?? 0, json, text, controller: base })
        })
        res.on('error', fail)
      })
      req.on('error', fail)
      req.end(body?.data)
    })
  }
}

/** The `error` code of an error answer, or null. */
export function errorCode(json: unknown): string | null {
  if (typeof json !== 'object' || json === null) return null
  const { error } = json as Record<string, unknown>
  return typeof error === 'string' ? error.slice(0, 64) : null
}

/** `"<error>: <message>"` of an error answer, for one log line (bounded, printable). */
export function errorText(answer: LinkAnswer): string {
  if (typeof answer.json !== 'object' || answer.json === null) return `${answer.status} ${printable(answer.text.slice(0, 120))}`
  const { error, message } = answer.json as Record<string, unknown>
  return `${answer.status} ${typeof error === 'string' ? error.slice(0, 64) : 'error'}${typeof message === 'string' ? `: ${printable(message.slice(0, 300))}` : ''}`
}
