/**
 * Automatic renewal of the node's certificate (SPEC "Device enrollment and renewal"): at two thirds of its
 * lifetime (±5 % of it, so that a fleet enrolled at once does not renew at once) the node makes a new
 * P-256 key in memory, sends `POST /v1/renew` over mTLS with its current certificate, polls
 * `GET /v1/renew/:id` as told, waits until the new certificate's notBefore has passed, and hands it to the
 * agent, which switches new connections to it without stopping a shard. A renewal that fails is reported
 * (the agent logs it at warn and counts it) and tried again with backoff; if none succeeds before expiry,
 * the controller refuses the certificate and the node's authority ends like any lost lease.
 */
import { generateKeyPairSync } from 'node:crypto'
import type { Logger } from 'pino'
import { buildCsr } from '../der/csr.js'
import { describe, type AgentEvent } from './agent-events.js'
import type { AgentClock } from './clock.js'
import type { ControllerReply } from './controller-client.js'
import { pollDelayMs, requestQueuedSchema, requestStatusSchema } from './enroll-wire.js'
import { identityFromPem, type NodeIdentity } from './identity.js'
import { PinnedKeys } from './pinned-keys.js'
import { sleep } from './sleep.js'

/** Where in its lifetime a certificate is renewed, and the jitter around it (both fractions of the lifetime). */
export const RENEW_AT = 2 / 3
export const RENEW_JITTER = 0.05
const RETRY_FIRST_MS = 2000
const RETRY_MAX_MS = 300_000
/** After notBefore, before the first use: X.509 times are whole seconds, and the controller's clock may lag a little. */
const NOT_BEFORE_MARGIN_MS = 1000

/** When `identity` is due for renewal (wall ms); `random` in [0, 1) places it within the jitter. */
export function renewalDueAt(identity: Pick<NodeIdentity, 'notBefore' | 'notAfter'>, random: number, at: number = RENEW_AT): number {
  const fraction = at + (random * 2 - 1) * RENEW_JITTER
  return identity.notBefore + Math.round((identity.notAfter - identity.notBefore) * fraction)
}

/** The wait before retry number `failures` (1-based): 2 s doubling up to 5 minutes, ±20 %. */
export function renewalRetryMs(failures: number, random: number): number {
  const base = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** Math.min(failures - 1, 20))
  return Math.round(base * (0.8 + 0.4 * random))
}

/** What a renewer uses of its agent. */
export interface RenewerDeps {
  readonly clock: AgentClock
  readonly logger: Logger
  /** Where in the lifetime to renew (default RENEW_AT). */
  readonly renewAt?: number
  /** The identity in use now. */
  current(): NodeIdentity
  /** Requests over the agent's mTLS client (its failover included). */
  post(path: string, body: unknown): Promise<ControllerReply>
  get(path: string): Promise<ControllerReply>
  /** Switches the agent to a renewed identity (resolves once new connections use it). */
  adopt(identity: NodeIdentity): Promise<void>
  emit(event: AgentEvent): void
}

class RenewalFailed extends Error {}

/** Renews the agent's certificate, again and again, until stopped. */
export class CertificateRenewer {
  private readonly abort = new AbortController()
  private running = false

  constructor(private readonly deps: RenewerDeps) {}

  /** Starts the loop (once). */
  start(): void {
    if (this.running) return
    this.running = true
    void this.loop().catch((err: unknown) => this.deps.logger.error({ err: describe(err) }, 'certificate renewal stopped unexpectedly'))
  }

  /** Stops the loop and any wait or poll in progress. */
  stop(): void {
    this.abort.abort()
  }

  private get stopped(): boolean {
    return this.abort.signal.aborted
  }

  private async loop(): Promise<void> {
    const { clock } = this.deps
    let failures = 0
    while (!this.stopped) {
      const identity = this.deps.current()
      if (failures === 0) {
        const wait = renewalDueAt(identity, clock.random(), this.deps.renewAt) - clock.wallNow()
        if (wait > 0 && !(await sleep(clock, wait, this.abort.signal))) return
      }
      try {
        const renewed = await this.renewOnce(identity)
        if (this.stopped) return
        await this.deps.adopt(renewed)
        failures = 0
        this.deps.emit({ type: 'certificate_renewed', serial: renewed.serial, notAfter: renewed.notAfter })
      } catch (err) {
        if (this.stopped) return
        failures += 1
        const retryInMs = renewalRetryMs(failures, clock.random())
        this.deps.emit({ type: 'certificate_renewal_failed', detail: describe(err), retryInMs, expiresAt: identity.notAfter })
        if (!(await sleep(clock, retryInMs, this.abort.signal))) return
      }
    }
  }

  /** One renewal: a new key, the request, the polls, the new identity once its notBefore passed. */
  private async renewOnce(identity: NodeIdentity): Promise<NodeIdentity> {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const keyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string
    const sent = await this.deps.post('/v1/renew', { csr: buildCsr(identity.nodeId, privateKey) })
    if (sent.status !== 202) throw new RenewalFailed(`the renewal request was answered ${answerText(sent)}`)
    const queued = requestQueuedSchema.safeParse(sent.body)
    if (!queued.success) throw new RenewalFailed(`the answer of ${sent.url} is not a renewal request`)
    const { request_id: id, poll_after_ms: told } = queued.data
    this.deps.logger.info({ request_id: id, controller: sent.url }, 'certificate renewal requested; waiting for the signer')
    const started = this.deps.clock.now()
    let delay = pollDelayMs(told)
    for (;;) {
      if (!(await sleep(this.deps.clock, delay, this.abort.signal))) throw new RenewalFailed('stopped')
      const reply = await this.deps.get(`/v1/renew/${id}`)
      delay = pollDelayMs(told)
      if (reply.status === 429) {
        delay = Math.max(reply.retryAfterMs ?? 1000, 100)
        continue
      }
      const parsed = reply.status === 200 ? requestStatusSchema.safeParse(reply.body) : null
      if (parsed === null || !parsed.success) throw new RenewalFailed(`the renewal poll was answered ${answerText(reply)}`)
      const status = parsed.data
      if (status.status === 'denied') throw new RenewalFailed(`the signer denied the renewal: ${status.reason}`)
      if (status.status === 'issued') return this.usable(identity, status.certificate, keyPem, status.plan_jwks)
      const waited = Math.round((this.deps.clock.now() - started) / 1000)
      this.deps.logger.info({ request_id: id, waited_s: waited }, `waiting for the signer (renewal ${id}, ${waited} s)`)
    }
  }

  /** The renewed identity, once its notBefore has passed; the plan keys follow the answer's when they continue the pinned ones. */
  private async usable(current: NodeIdentity, cert: string, key: string, jwks: unknown): Promise<NodeIdentity> {
    const pinned = await continuedKeys(current.pinnedKeys, jwks)
    const renewed = await identityFromPem({ cert, key, ca: current.ca, jwks: pinned }, this.deps.clock.wallNow())
    if (renewed.nodeId !== current.nodeId) throw new RenewalFailed(`the renewed certificate names ${renewed.nodeId}, not ${current.nodeId}`)
    const wait = renewed.notBefore + NOT_BEFORE_MARGIN_MS - this.deps.clock.wallNow()
    if (wait > 0 && !(await sleep(this.deps.clock, wait, this.abort.signal))) throw new RenewalFailed('stopped')
    return renewed
  }
}

/**
 * The plan keys a renewal answer carries, when they share a key with the pinned ones (a plan-key rotation
 * keeps the previous key published, so a node that renews follows rotations); else the pinned ones.
 */
async function continuedKeys(pinned: PinnedKeys, jwks: unknown): Promise<PinnedKeys> {
  if (jwks === undefined) return pinned
  try {
    const offered = await PinnedKeys.fromJwks(jwks, 'the renewal answer')
    return offered.kids.some((kid) => pinned.get(kid) !== undefined) ? offered : pinned
  } catch {
    return pinned
  }
}

function answerText(reply: ControllerReply): string {
  return `${reply.status} ${reply.errorCode ?? ''}${reply.errorMessage ? `: ${reply.errorMessage}` : ''} (${reply.url})`.replace(/ +\(/, ' (')
}
