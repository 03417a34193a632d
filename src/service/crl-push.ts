/**
 * POST /v1/crl behind the route: an operator's CRL is judged against the CRL in force by the same rules
 * as a changed `tls.crl` file (crl-decide.ts), kept where a restart and every replica find it, then
 * installed. Stored before it is installed: a CRL in force that a restart could lose would bring revoked
 * certificates back. Pushes run one at a time, so the stored copy only ever moves forward.
 */
import type { Logger } from 'pino'
import { AppError } from '../errors.js'
import type { ParsedCrl } from '../identity/crl.js'
import type { CrlEnforcement, CrlOfferOutcome } from '../identity/crl-enforcement.js'
import type { PushedCrlStore } from './pushed-crl-store.js'

/** The 200 answer: the CRL in force after the push; `changed` is false when it was in force already. */
export interface CrlPushAnswer {
  readonly crl_number: string | null
  readonly this_update: string
  readonly next_update: string | null
  readonly revoked: number
  readonly changed: boolean
}

export interface CrlPushDeps {
  readonly crls: Pick<CrlEnforcement, 'judge' | 'offer' | 'inForce'>
  readonly store: PushedCrlStore
  readonly logger?: Logger | undefined
}

/** Takes operators' CRLs, one at a time. */
export class CrlPush {
  private queue: Promise<unknown> = Promise.resolve()

  constructor(private readonly deps: CrlPushDeps) {}

  /** Installs `pem` for `operator`, or throws AppError (400 with the reason; 503 when it cannot be kept). */
  push(pem: string, operator: string): Promise<CrlPushAnswer> {
    const run = this.queue.then(() => this.pushNow(pem, operator))
    this.queue = run.catch(() => undefined)
    return run
  }

  private async pushNow(pem: string, by: string): Promise<CrlPushAnswer> {
    const { crls, store } = this.deps
    const version = await store.prepare()
    const verdict = crls.judge(pem, { source: 'push' })
    // A refusal goes through offer, which audits it with the operator's name and changes nothing.
    if (verdict.kind === 'refuse' || verdict.kind === 'pending') return answer(crls.offer(pem, { source: 'push', by }))
    const crl: ParsedCrl = verdict.kind === 'load' ? verdict.crl : crls.inForce
    try {
      // Also when it is in force already: the file or another replica may have brought it, not a push.
      await store.save(crl, version)
    } catch (err) {
      if (err instanceof AppError) throw err
      const code = (err as NodeJS.ErrnoException).code ?? (err as { kind?: string }).kind ?? 'error' // a file error's code, an etcd error's kind
      // Not installed by this push. A store that lost only its answer may hold it all the same: HA replicas
      // then install it from etcd (audited as the cluster's), and a retry answers with what is in force.
      this.deps.logger?.error({ err: (err as Error).message }, 'a pushed CRL could not be stored; this push did not install it')
      throw new AppError('unavailable', `the CRL could not be stored (${code}); retry: the answer says whether it is in force`)
    }
    const outcome = crls.offer(pem, { source: 'push', by })
    if (outcome.kind === 'refused') store.notInstalled?.(crl.pem)
    return answer(outcome)
  }
}

function answer(outcome: CrlOfferOutcome): CrlPushAnswer {
  switch (outcome.kind) {
    case 'refused':
      throw new AppError('invalid_request', `CRL refused (${outcome.reason}): ${outcome.message}; the CRL in force is unchanged`)
    case 'not_yet_valid': // only the cluster's copy is answered so; a push is refused instead
      throw new AppError('invalid_request', 'CRL refused (not_yet_valid): its thisUpdate is in the future')
    case 'loaded':
    case 'same':
      return {
        crl_number: outcome.crl.crlNumber?.toString() ?? null,
        this_update: outcome.crl.thisUpdate.toISOString(),
        next_update: outcome.crl.nextUpdate?.toISOString() ?? null,
        revoked: outcome.crl.revokedSerials.size,
        changed: outcome.kind === 'loaded',
      }
  }
}
