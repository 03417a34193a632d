/**
 * Enrollment tests' helpers: a controller with its enrollment listener, a signer that runs in the test
 * as the CA host's would (pulls the queue over mTLS with a signer certificate, judges and signs with
 * pki/'s signPass, posts every outcome and the CRL it made), and bootstrap tokens.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { signPass, type SignerOutcome } from '../../pki/enroll-issue.js'
import type { PulledRequest } from '../../pki/enroll-judge.js'
import { createToken, type TokenOptions } from '../../pki/token-store.js'
import { issueBundle } from '../../pki/issue-certs.js'
import { request, type Identity, type Pki, type TestController } from '../e2e/harness.js'
import { controllerIn } from './support.js'

/** A controller whose enrollment listener is on (a free port), polls told every `pollMs`. */
export async function enrollController(pki: Pki, dir: string, settings: Record<string, unknown> = {}, pollMs = 250): Promise<TestController & { enrollPort: number }> {
  const ctl = await controllerIn(pki, dir, { enroll: { host: '127.0.0.1', port: 0, poll_after_ms: pollMs }, ...settings })
  const enrollPort = ctl.running.enrollPort
  if (enrollPort === null) throw new Error('the enrollment listener did not start')
  return { ...ctl, enrollPort }
}

/** A bootstrap token (the text pxe-pki token create prints once). */
export async function token(pki: Pki, opts: TokenOptions): Promise<string> {
  return (await createToken(pki.dir, opts)).token
}

/** The signer of a test: pass() once, or start() a loop every `everyMs`. */
export class TestSigner {
  readonly outcomes: SignerOutcome[] = []
  readonly errors: string[] = []
  private timer: NodeJS.Timeout | null = null
  private busy: Promise<void> | null = null

  private constructor(private readonly pki: Pki, private readonly port: number, private readonly id: Identity) {}

  /** Issues the signer's certificate (OU=signer, EC key) and returns a stopped signer. */
  static async create(pki: Pki, port: number, name = 'signer-1'): Promise<TestSigner> {
    const out = await issueBundle(pki.dir, name, 'signer', { keyType: 'ec', replace: true })
    const id = { cert: readFileSync(join(out.bundleDir, 'cert.pem'), 'utf8'), key: readFileSync(join(out.bundleDir, 'key.pem'), 'utf8') }
    return new TestSigner(pki, port, id)
  }

  /** Outcomes issued so far (of kind `kind`, when given). */
  issued(kind?: 'enroll' | 'renew'): Extract<SignerOutcome, { issued: unknown }>[] {
    return this.outcomes.filter((o): o is Extract<SignerOutcome, { issued: unknown }> => 'issued' in o && (kind === undefined || o.kind === kind))
  }

  /** Pulls, judges and signs, posts the outcomes (held ones stay pending) and a CRL the pass made. */
  async pass(): Promise<void> {
    const list = await request(this.port, this.pki.ca, this.id, '/v1/enroll/requests')
    if (list.status !== 200) throw new Error(`GET /v1/enroll/requests answered ${list.status} ${list.text}`)
    const requests = list.json.requests as PulledRequest[]
    if (requests.length === 0) return
    const { outcomes, crl } = await signPass(this.pki.dir, requests)
    if (crl !== null) {
      const pushed = await request(this.port, this.pki.ca, this.id, '/v1/crl', { rawBody: crl, contentType: 'application/pkix-crl' })
      if (pushed.status !== 200) this.errors.push(`POST /v1/crl answered ${pushed.status} ${pushed.text}`)
    }
    for (const outcome of outcomes) {
      if ('held' in outcome) continue
      const body = 'issued' in outcome ? { certificate: outcome.issued.certificate } : { denied: outcome.denied }
      const posted = await request(this.port, this.pki.ca, this.id, `/v1/enroll/requests/${outcome.request_id}`, { body })
      if (posted.status !== 200) this.errors.push(`POST ${outcome.request_id} answered ${posted.status} ${posted.text}`)
      this.outcomes.push(outcome)
    }
  }

  /** Runs pass() every `everyMs` until stop(). */
  start(everyMs = 200): void {
    if (this.timer !== null) return
    const tick = () => {
      this.busy = this.pass()
        .catch((err: Error) => void this.errors.push(err.message))
        .finally(() => {
          this.busy = null
          if (this.timer !== null) this.timer = setTimeout(tick, everyMs)
        })
    }
    this.timer = setTimeout(tick, everyMs)
  }

  async stop(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    await this.busy
  }
}
