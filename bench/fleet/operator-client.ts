/**
 * The operator's side of a fleet run, over mTLS with an operator certificate: drain a node, read the plan.
 * With HA replicas it follows the leader as the node agent does: each port in order, the next one on a
 * connection error or a 503 `not_leader`.
 */
import https from 'node:https'
import { z } from 'zod'

/** The parts of `GET /v1/plan` a run checks (SPEC "Operator endpoints"). */
const planSchema = z.object({
  generation: z.number().int(),
  total_shards: z.number().int(),
  unassigned: z.number().int(),
  nodes: z.array(z.object({ node_id: z.string(), capacity: z.number().int(), draining: z.boolean(), range_start: z.number().int(), range_count: z.number().int() })),
})

/** The controller's plan as the operator sees it. */
export type OperatorPlan = z.infer<typeof planSchema>

/** Operator credentials and the controller's address. */
export interface OperatorIdentity {
  readonly cert: string
  readonly key: string
  readonly ca: string
}

const TIMEOUT_MS = 10_000

/** An answer other than 200 to an operator request (e.g. 429 `rate_limited`, with its `retry_after_ms`). */
export class OperatorRefused extends Error {
  override readonly name = 'OperatorRefused'
  constructor(
    message: string,
    readonly status: number,
    readonly retryAfterMs: number | null,
  ) {
    super(message)
  }
}

/** An answer and the port that gave it. */
interface Answer {
  readonly status: number
  readonly body: unknown
  readonly port: number
  /** ms from sending until the TLS connection was established (TCP and a full handshake: agent: false). */
  readonly connectMs: number
  /** ms from then until the whole answer was read: the request on an established connection. */
  readonly answerMs: number
}

/** How the last answered request's time split (see Answer). */
export interface RequestSplit {
  readonly connectMs: number
  readonly answerMs: number
}

/** An operator talking to the controller replicas' ports on 127.0.0.1. */
export class OperatorClient {
  /** The split of the last request that was answered (by the port that answered it), or null. */
  lastSplit: RequestSplit | null = null

  constructor(private readonly id: OperatorIdentity, private readonly ports: () => readonly number[]) {}

  /** The port of the replica that answers `GET /v1/plan` with 200 itself (the leader), or null. */
  async leaderPort(): Promise<number | null> {
    for (const port of this.ports()) {
      const answer = await this.requestAt(port, 'GET', '/v1/plan').catch(() => null)
      if (answer?.status === 200) return port
    }
    return null
  }

  /** `GET /v1/plan`. */
  async plan(): Promise<OperatorPlan> {
    const { status, body } = await this.request('GET', '/v1/plan')
    if (status !== 200) throw new Error(`GET /v1/plan answered ${status}: ${JSON.stringify(body).slice(0, 200)}`)
    return planSchema.parse(body)
  }

  /** `POST /v1/nodes/:id/drain`; resolves with the new generation, rejects with OperatorRefused on another answer. */
  async drain(nodeId: string, draining: boolean): Promise<number> {
    // forced: the scenario drains on purpose, also when the other nodes cannot take every shard
    const { status, body } = await this.request('POST', `/v1/nodes/${encodeURIComponent(nodeId)}/drain`, draining ? { draining, force: true } : { draining })
    if (status !== 200) {
      const retryAfterMs = (body as { retry_after_ms?: unknown } | null)?.retry_after_ms
      throw new OperatorRefused(`drain ${nodeId} answered ${status}: ${JSON.stringify(body).slice(0, 200)}`, status, typeof retryAfterMs === 'number' ? retryAfterMs : null)
    }
    return z.object({ generation: z.number().int() }).parse(body).generation
  }

  /** `POST /v1/reshard`: a live reshard to `totalShards`; resolves with its first generation, rejects on another answer than 202. */
  async reshard(totalShards: number): Promise<number> {
    const { status, body } = await this.request('POST', '/v1/reshard', { total_shards: totalShards })
    if (status !== 202) throw new OperatorRefused(`reshard to ${totalShards} answered ${status}: ${JSON.stringify(body).slice(0, 200)}`, status, null)
    return z.object({ generation: z.number().int() }).parse(body).generation
  }

  /** One request, to each port in order until one answers other than 503 not_leader (the agent's rule). */
  private async request(method: string, path: string, body?: unknown): Promise<Answer> {
    let last: Answer | Error = new Error('no controller port')
    for (const port of this.ports()) {
      try {
        last = await this.requestAt(port, method, path, body)
        this.lastSplit = { connectMs: last.connectMs, answerMs: last.answerMs }
        if (!(last.status === 503 && (last.body as { error?: unknown } | null)?.error === 'not_leader')) return last
      } catch (err) {
        last = err as Error
      }
    }
    if (last instanceof Error) throw last
    return last
  }

  private requestAt(port: number, method: string, path: string, body?: unknown): Promise<Answer> {
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const sent = performance.now()
    let established: number | null = null
    return new Promise((resolve, reject) => {
      const req = https.request(
        {
          host: '127.0.0.1',
          port,
          path,
          method,
          ca: this.id.ca,
          cert: this.id.cert,
          key: this.id.key,
          agent: false,
          timeout: TIMEOUT_MS,
          headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        },
        (res) => {
          const chunks: Buffer[] = []
          res.on('data', (c: Buffer) => chunks.push(c))
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8')
            let parsed: unknown = text
            try {
              parsed = JSON.parse(text)
            } catch {
              /* not JSON: kept as text for the error message */
            }
            const end = performance.now()
            const connected = established ?? sent // (a socket reused would emit no secureConnect; agent: false opens one each time)
            resolve({ status: res.statusCode ?? 0, body: parsed, port, connectMs: connected - sent, answerMs: end - connected })
          })
          res.on('error', reject)
        },
      )
      req.once('socket', (socket) => socket.once('secureConnect', () => (established = performance.now())))
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within ${TIMEOUT_MS} ms`)))
      req.on('error', reject)
      req.end(payload)
    })
  }
}
