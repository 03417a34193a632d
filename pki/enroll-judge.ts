/**
 * The signer's judgement of one request it pulled from a controller (SPEC "Device enrollment and
 * renewal"): everything is checked here again, on the CA host, because the controller that queued the
 * request is not trusted to mint an identity. An enrollment needs a known, unrevoked, unexpired token with
 * a use left, a name inside its pattern, a proof under its secret over this very CSR, and a CSR whose own
 * signature, key and name hold; a renewal needs a presenting certificate that is a valid, unrevoked node
 * certificate of the name and the newest one it holds. Pure: the index and tokens are read by the caller.
 */
import { nameProblem } from '../src/core/names.js'
import { proofMatches } from '../src/core/enroll-token.js'
import { CsrError, readCsr, type VerifiedCsr } from '../src/der/csr.js'
import type { CertRecord, PkiIndex } from './index-file.js'
import { holdersOf } from './leaf.js'
import { MAX_ENROLL_CERT_DAYS, tokenAllowsName, tokenCertLifetimeMs, tokenUnusable, type TokenRecord } from './token-store.js'

/** A request as the controller lists it to the signer (GET /v1/enroll/requests). */
export interface PulledRequest {
  readonly request_id: string
  readonly kind: 'enroll' | 'renew'
  readonly name: string
  readonly csr: string
  readonly token_id: string | null
  readonly proof: string | null
  readonly source: string
  readonly presenting_serial: string | null
  readonly created_at: string
}

/** What the signer does with a request. */
export type Verdict =
  | { readonly kind: 'issue'; readonly csr: VerifiedCsr; readonly rule: 'token_auto' | 'manual' | 'renewal'; readonly lifetimeMs: number; readonly supersedes: readonly string[]; readonly token: TokenRecord | null }
  | { readonly kind: 'deny'; readonly reason: string }
  /** Left pending for `pxe-pki enroll approve` (manual tokens, a re-enrollment under --reenroll manual). */
  | { readonly kind: 'hold'; readonly why: string }

/** What a judgement reads. */
export interface JudgeContext {
  readonly index: PkiIndex
  readonly tokens: ReadonlyMap<string, TokenRecord>
  readonly now: Date
  /** True for `pxe-pki enroll approve`: the operator approves what would be held. */
  readonly approving: boolean
}

const DAY_MS = 86_400_000

function verifiedCsr(req: PulledRequest): VerifiedCsr | string {
  let csr: VerifiedCsr
  try {
    csr = readCsr(req.csr, 'enrollment')
  } catch (err) {
    if (err instanceof CsrError) return err.message
    throw err
  }
  const problem = nameProblem(csr.name)
  if (problem !== null) return `the CSR's CN is not a valid name: ${problem}`
  if (csr.name !== req.name) return 'the CSR names another node than the request'
  return csr
}

/** The newest (latest notBefore) of `records`. */
function newest(records: readonly CertRecord[]): CertRecord | undefined {
  return [...records].sort((a, b) => Date.parse(b.not_before) - Date.parse(a.not_before) || (a.serial < b.serial ? 1 : -1))[0]
}

/**
 * The certificates that hold `name` now, but those issued for `req` itself: an answer that never reached the
 * controller (a post lost, the signer restarted) is issued again for the same request, not judged as a
 * re-enrollment or a superseding renewal. Those earlier answers are returned apart (an enrollment revokes them).
 */
function holdersBesides(req: PulledRequest, name: string, ctx: JudgeContext): { holders: CertRecord[]; earlier: CertRecord[] } {
  const all = holdersOf(ctx.index, name, ctx.now)
  return { holders: all.filter((c) => c.request_id !== req.request_id), earlier: all.filter((c) => c.request_id === req.request_id) }
}

function judgeEnrollment(req: PulledRequest, ctx: JudgeContext): Verdict {
  const token = req.token_id === null ? undefined : ctx.tokens.get(req.token_id)
  if (token === undefined) return { kind: 'deny', reason: 'unknown token' }
  const answeredBefore = holdersBesides(req, req.name, ctx).earlier.length > 0
  const unusable = tokenUnusable(token, ctx.now)
  // an answer that never arrived spent its use already: issuing it again spends none
  if (unusable !== null && !(answeredBefore && token.uses_left <= 0 && token.revoked_at === undefined && Date.parse(token.expires_at) > ctx.now.getTime())) {
    return { kind: 'deny', reason: unusable }
  }
  const csr = verifiedCsr(req)
  if (typeof csr === 'string') return { kind: 'deny', reason: csr }
  if (!tokenAllowsName(token, csr.name)) return { kind: 'deny', reason: `the name is outside the token's pattern (${token.names})` }
  if (req.proof === null || !proofMatches(Buffer.from(token.secret, 'base64url'), csr.der, req.proof)) {
    return { kind: 'deny', reason: "the proof does not hold: not made with this token's secret over this CSR" }
  }
  const { holders, earlier } = holdersBesides(req, csr.name, ctx)
  const foreign = holders.find((c) => c.role !== 'node')
  // a token enrolls nodes: it never takes over the name of an operator, a signer or the server
  if (foreign !== undefined) return { kind: 'deny', reason: `the name is held by a certificate of role ${foreign.role}` }
  if (holders.length > 0 && token.reenroll === 'manual' && !ctx.approving) {
    return { kind: 'hold', why: `re-enrollment: ${csr.name} holds a valid certificate (${holders[0]!.serial}); the token asks for manual approval` }
  }
  if (token.approve === 'manual' && !ctx.approving) return { kind: 'hold', why: 'the token asks for manual approval' }
  // a use was spent for this request already when it was answered before: not again
  return { kind: 'issue', csr, rule: ctx.approving ? 'manual' : 'token_auto', lifetimeMs: tokenCertLifetimeMs(token), supersedes: [...holders, ...earlier].map((c) => c.serial), token: earlier.length > 0 ? null : token }
}

function judgeRenewal(req: PulledRequest, ctx: JudgeContext): Verdict {
  const serial = req.presenting_serial?.toLowerCase().replace(/^0+/, '') ?? ''
  const record = ctx.index.certs.find((c) => c.serial.replace(/^0+/, '') === serial)
  if (record === undefined) return { kind: 'deny', reason: 'the presenting certificate was not issued by this CA' }
  if (record.role !== 'node') return { kind: 'deny', reason: `the presenting certificate has role ${record.role}; only node certificates renew` }
  if (record.name !== req.name) return { kind: 'deny', reason: 'the presenting certificate names another node' }
  if (record.revoked_at !== undefined) return { kind: 'deny', reason: 'the presenting certificate is revoked' }
  if (Date.parse(record.not_after) <= ctx.now.getTime()) return { kind: 'deny', reason: 'the presenting certificate has expired' }
  if (newest(holdersBesides(req, record.name, ctx).holders)?.serial !== record.serial) {
    return { kind: 'deny', reason: 'the presenting certificate is superseded by a newer one of its name' }
  }
  const csr = verifiedCsr(req)
  if (typeof csr === 'string') return { kind: 'deny', reason: csr }
  // the same lifetime again (an enrolled certificate keeps its token's; a hand-issued one its own, at most 90 days)
  const lifetime = Date.parse(record.not_after) - Date.parse(record.not_before)
  const lifetimeMs = Math.min(MAX_ENROLL_CERT_DAYS * DAY_MS, Math.max(60_000, lifetime))
  return { kind: 'issue', csr, rule: 'renewal', lifetimeMs, supersedes: [], token: null }
}

/** Judges one request against the PKI as it stands. */
export function judge(req: PulledRequest, ctx: JudgeContext): Verdict {
  return req.kind === 'renew' ? judgeRenewal(req, ctx) : judgeEnrollment(req, ctx)
}
