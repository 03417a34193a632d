/** The operator endpoints as calls: request → check the status → parse the answer (or throw the controller's error). */
import type { z } from 'zod'
import type { Answer, Body, ControllerClient } from './client.js'
import { errorBody } from './client.js'
import { CtlError } from './errors.js'
import { drainAnswerSchema, enrollQueueSchema, planSchema, reshardAnswerSchema, routeAnswerSchema } from './wire.js'
import type { DrainAnswer, EnrollQueue, Plan, RouteAnswer } from './wire.js'

/** A parsed answer, with the controller's JSON as it came (for -o json) and who answered. */
export interface Result<T> {
  readonly value: T
  readonly raw: unknown
  readonly controller: string
}

/** A status the caller handles itself (a 404 of an endpoint this controller lacks). */
export class Refused extends CtlError {
  constructor(
    message: string,
    code: string | null,
    readonly status: number,
  ) {
    super(message, code)
  }
}

/** The controller's refusal as an error: its code and message, which controller said it, and a hint for a 403. */
export function refusal(answer: Answer, forbiddenHint: string | null = null): Refused {
  const { error, message } = errorBody(answer.json)
  const what = error ?? `HTTP ${answer.status}`
  const hint = answer.status === 403 && forbiddenHint !== null ? `; ${forbiddenHint}` : ''
  return new Refused(`${what}: ${message ?? answer.text.slice(0, 200)} (from ${answer.controller})${hint}`, error, answer.status)
}

function parsed<T>(answer: Answer, schema: z.ZodType<T>, what: string, forbiddenHint: string | null): Result<T> {
  if (answer.status < 200 || answer.status > 299) throw refusal(answer, forbiddenHint)
  const result = schema.safeParse(answer.json)
  if (!result.success) {
    const issue = result.error.issues[0]!
    throw new CtlError(`${answer.controller} answered ${what} in an unexpected shape ("${issue.path.join('.')}": ${issue.message})`)
  }
  return { value: result.data, raw: answer.json, controller: answer.controller }
}

/** The calls pxe-ctl makes; nothing else of the controller is used. */
export class ControllerApi {
  constructor(
    readonly client: ControllerClient,
    /** Added to a 403: why this bundle may be the wrong one (null for an operator bundle). */
    private readonly forbiddenHint: string | null = null,
  ) {}

  /** GET /v1/plan. */
  async plan(): Promise<Result<Plan>> {
    return parsed(await this.client.request('GET', '/v1/plan'), planSchema, 'GET /v1/plan', this.forbiddenHint)
  }

  /** POST /v1/nodes/:node_id/drain; `force` lets a drain leave shards without a node (sent only when true). */
  async setDraining(nodeId: string, draining: boolean, force = false): Promise<Result<DrainAnswer>> {
    const body: Body = { contentType: 'application/json', data: JSON.stringify(force ? { draining, force: true } : { draining }) }
    return parsed(await this.client.request('POST', `/v1/nodes/${encodeURIComponent(nodeId)}/drain`, body), drainAnswerSchema, 'the drain', this.forbiddenHint)
  }

  /** GET /v1/route/:guild_id. */
  async route(guildId: string): Promise<Result<RouteAnswer>> {
    return parsed(await this.client.request('GET', `/v1/route/${guildId}`), routeAnswerSchema, 'the route', this.forbiddenHint)
  }

  /** POST /v1/reshard (202). */
  async startReshard(totalShards: number): Promise<Result<z.infer<typeof reshardAnswerSchema>>> {
    const body: Body = { contentType: 'application/json', data: JSON.stringify({ total_shards: totalShards }) }
    return parsed(await this.client.request('POST', '/v1/reshard', body), reshardAnswerSchema, 'the reshard', this.forbiddenHint)
  }

  /** GET /v1/enroll/queue (a 404 from a controller that has no enrollment: the caller says so). */
  async enrollQueue(): Promise<Result<EnrollQueue>> {
    return parsed(await this.client.request('GET', '/v1/enroll/queue'), enrollQueueSchema, 'the enrollment queue', this.forbiddenHint)
  }

  /** DELETE /v1/reshard. */
  async abortReshard(): Promise<Answer> {
    const answer = await this.client.request('DELETE', '/v1/reshard')
    if (answer.status < 200 || answer.status > 299) throw refusal(answer, this.forbiddenHint)
    return answer
  }

  /** POST /v1/crl with a PEM CRL. */
  async pushCrl(pem: string): Promise<Answer> {
    const answer = await this.client.request('POST', '/v1/crl', { contentType: 'application/pkix-crl', data: pem })
    if (answer.status < 200 || answer.status > 299) throw refusal(answer, this.forbiddenHint)
    return answer
  }
}
