/**
 * HTTPS with the operator's bundle, trusting only its ca.pem, over the context's controllers in order.
 * A connection error, a timeout or a 503 (`not_leader` from an HA follower, `unavailable` from a leader
 * that lost etcd) moves on to the next controller; any other answer is the answer. The controller that
 * answered is remembered and asked first next time (watch, drain --wait).
 */
import https from 'node:https'
import type { OperatorBundle } from './bundle.js'
import { isDeferredConnectionError } from '../net/busy-notice.js'
import { CtlError } from './errors.js'

/** The most of an answer read (a plan of 10,000 nodes is a few MB). */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024

/** One controller's answer. */
export interface Answer {
  readonly status: number
  readonly text: string
  /** The body parsed as JSON, or undefined. */
  readonly json: unknown
  /** The base URL of the controller that answered. */
  readonly controller: string
}

/** A request body and its type. */
export interface Body {
  readonly contentType: string
  readonly data: string | Buffer
}

class TransportError extends Error {}

/** A connection failure in words an operator can act on. */
export function describeFailure(err: Error & { code?: string }): string {
  const code = err.code ?? ''
  if (err instanceof TransportError) return err.message
  if (code === 'ECONNREFUSED') return 'connection refused'
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host name not found'
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'host unreachable'
  if (['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'UNABLE_TO_GET_ISSUER_CERT', 'CERT_SIGNATURE_FAILURE'].includes(code)) {
    return `TLS: the controller's certificate is not signed by the bundle's ca.pem (${code}); is this the right bundle for this controller?`
  }
  if (code === 'CERT_HAS_EXPIRED' || code === 'CERT_NOT_YET_VALID') return `TLS: the controller's certificate is not valid now (${code})`
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return `TLS: the controller's certificate does not name this host (${code}); use the host name or address it was issued for`
  if (/ALERT/.test(code)) return `TLS: the controller refused this operator certificate in the handshake (${code}); is it revoked, expired, or from another CA?`
  // What a controller in a reconnect storm answers a connection it defers (the line "PXE-BUSY ...").
  if (isDeferredConnectionError(err)) return 'the controller deferred this connection: it is busy with a reconnect storm (a restart or a take-over), or this port does not speak TLS; retry in a few seconds'
  if (code === 'ECONNRESET' || code === 'EPIPE') return 'the connection was closed by the controller (a refused client certificate looks like this too)'
  return `${err.message.slice(0, 200)}${code ? ` (${code})` : ''}`
}

/** The controllers of a context, asked in order. */
export class ControllerClient {
  private preferred = 0

  constructor(
    private readonly controllers: readonly string[],
    private readonly bundle: OperatorBundle,
    private readonly timeoutMs: number,
    /** -v: one line per attempt. */
    private readonly verbose: ((line: string) => void) | null,
    /** Aborted on Ctrl-C by a command that waits (watch, --wait): the request in flight ends at once. */
    private readonly signal?: AbortSignal,
  ) {}

  /** The controller that answered last (or the first one before any answer). */
  get current(): string {
    return this.controllers[this.preferred]!
  }

  /** Sends one request, failing over as the module doc says; throws CtlError when no controller answers. */
  async request(method: string, path: string, body?: Body): Promise<Answer> {
    const skipped: string[] = []
    for (let i = 0; i < this.controllers.length; i++) {
      const at = (this.preferred + i) % this.controllers.length
      const base = this.controllers[at]!
      let answer: Answer
      try {
        answer = await this.once(base, method, path, body)
      } catch (err) {
        if (this.signal?.aborted) throw new CtlError(`interrupted during ${method} ${path}`, 'interrupted')
        const why = describeFailure(err as Error)
        this.verbose?.(`${method} ${path} → ${base}: ${why}; trying the next controller`)
        skipped.push(`${base}: ${why}`)
        continue
      }
      if (answer.status === 503) {
        const { error, message } = errorBody(answer.json)
        const why = `503 ${error ?? 'unavailable'}${message ? `: ${message}` : ''}`
        this.verbose?.(`${method} ${path} → ${base}: ${why}; trying the next controller`)
        skipped.push(`${base}: ${why}`)
        continue
      }
      this.verbose?.(`${method} ${path} → ${base}: ${answer.status}`)
      this.preferred = at
      return answer
    }
    throw new CtlError(`no controller answered ${method} ${path}:\n  ${skipped.join('\n  ')}`, 'no_controller')
  }

  private once(base: string, method: string, path: string, body: Body | undefined): Promise<Answer> {
    const url = new URL(path, base)
    const headers: Record<string, string | number> = { accept: 'application/json' }
    if (body !== undefined) {
      headers['content-type'] = body.contentType
      headers['content-length'] = Buffer.byteLength(body.data)
    }
    return new Promise((resolve, reject) => {
      const req = https.request(url, {
        method,
        headers,
        cert: this.bundle.cert,
        key: this.bundle.key,
        // The controller's own CA only, never the system store; verification is never turned off.
        ca: this.bundle.ca,
        agent: false,
        ...(this.signal ? { signal: this.signal } : {}),
      })
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
          resolve({ status: res.statusCode ?? 0, text, json, controller: base })
        })
        res.on('error', (err) => (clearTimeout(timer), reject(err)))
      })
      req.on('error', (err) => (clearTimeout(timer), reject(err)))
      req.end(body?.data)
    })
  }
}

/** The `{"error", "message"}` of an error answer (either may be missing from a foreign server). */
export function errorBody(json: unknown): { error: string | null; message: string | null } {
  if (typeof json !== 'object' || json === null) return { error: null, message: null }
  const { error, message } = json as Record<string, unknown>
  return { error: typeof error === 'string' ? error.slice(0, 64) : null, message: typeof message === 'string' ? message.slice(0, 500) : null }
}
