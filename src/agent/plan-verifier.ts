/**
 * Verifies a plan token as SPEC "Signed plans" requires of a node, against the pinned keys only:
 * alg EdDSA, typ pxe-plan+jwt, a pinned kid, a valid signature, sub = this node, consistent claims,
 * exp in the future (within a clock-skew allowance) and no generation below the last accepted one.
 * Every refusal carries a stable reason code (the same codes as test/vectors/plan-jws.json).
 */
import { compactVerify, decodeProtectedHeader, errors } from 'jose'
import { claimsInconsistency, planClaimsSchema, type PlanClaims } from './plan-claims.js'
import type { PinnedKeys } from './pinned-keys.js'

/** The protected header's `typ` of every plan. */
export const PLAN_TYP = 'pxe-plan+jwt'

/** Stable reasons to refuse a plan token, in the order they are checked. */
export const PLAN_REFUSAL_REASONS = [
  'malformed_token',
  'alg_not_allowed',
  'wrong_typ',
  'unknown_kid',
  'bad_signature',
  'malformed_payload',
  'wrong_subject',
  'inconsistent_claims',
  'expired',
  'generation_rollback',
] as const

/** Why a plan token was refused. */
export type PlanRefusalReason = (typeof PLAN_REFUSAL_REASONS)[number]

/** The outcome of verifying one token. */
export type PlanVerdict =
  | { readonly ok: true; readonly plan: PlanClaims; readonly kid: string }
  | { readonly ok: false; readonly reason: PlanRefusalReason; readonly detail: string }

/** What a token is checked against besides the keys. */
export interface VerifyContext {
  /** This node's ID (the certificate CN): the plan's `sub` must equal it. */
  readonly nodeId: string
  /** Wall-clock milliseconds now. */
  readonly nowMs: number
  /** The generation of the last plan accepted (across restarts), or null if none. */
  readonly lastGeneration: number | null
  /** How far past `exp` a plan is still accepted, for clocks that differ a little. */
  readonly clockSkewMs: number
}

/** Longest token considered (a plan for 128 shards is about 1.5 KiB). */
const MAX_TOKEN_LENGTH = 65_536
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/

const refuse = (reason: PlanRefusalReason, detail: string): PlanVerdict => ({ ok: false, reason, detail })
/** At most 64 characters of an untrusted value, for messages. */
const clip = (value: unknown) => JSON.stringify(value)?.slice(0, 64) ?? String(value)

/** Header checks, then the signature under the pinned key the header names. */
async function verifiedPayload(token: string, keys: PinnedKeys): Promise<{ payload: Uint8Array; kid: string } | PlanVerdict> {
  if (token.length > MAX_TOKEN_LENGTH || !COMPACT_JWS.test(token)) return refuse('malformed_token', 'not a compact JWS')
  let header: ReturnType<typeof decodeProtectedHeader>
  try {
    header = decodeProtectedHeader(token)
  } catch {
    return refuse('malformed_token', 'the protected header is not a base64url JSON object')
  }
  if (header.alg !== 'EdDSA') return refuse('alg_not_allowed', `alg ${clip(header.alg)} is not EdDSA`)
  if (header.typ !== PLAN_TYP) return refuse('wrong_typ', `typ ${clip(header.typ)} is not ${PLAN_TYP}`)
  const kid = header.kid
  const key = typeof kid === 'string' ? keys.get(kid) : undefined
  if (key === undefined || typeof kid !== 'string') return refuse('unknown_kid', `kid ${clip(kid)} is not a pinned plan key`)
  try {
    const { payload } = await compactVerify(token, key, { algorithms: ['EdDSA'] })
    return { payload, kid }
  } catch (err) {
    if (err instanceof errors.JWSSignatureVerificationFailed) return refuse('bad_signature', `the signature does not verify under key ${kid}`)
    return refuse('malformed_token', `the JWS is not acceptable (${(err as errors.JOSEError).code ?? 'invalid'})`)
  }
}

/** Parses the verified payload and applies the claim rules. */
function checkClaims(payload: Uint8Array, kid: string, ctx: VerifyContext): PlanVerdict {
  let json: unknown
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payload))
  } catch {
    return refuse('malformed_payload', 'the payload is not UTF-8 JSON')
  }
  const parsed = planClaimsSchema.safeParse(json)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    return refuse('malformed_payload', `claim ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`)
  }
  const plan = parsed.data
  if (plan.sub !== ctx.nodeId) return refuse('wrong_subject', `the plan is for ${clip(plan.sub)}, not ${ctx.nodeId}`)
  const inconsistency = claimsInconsistency(plan)
  if (inconsistency !== null) return refuse('inconsistent_claims', inconsistency)
  if (ctx.nowMs >= plan.exp * 1000 + ctx.clockSkewMs) return refuse('expired', `the plan expired at ${new Date(plan.exp * 1000).toISOString()}`)
  if (ctx.lastGeneration !== null && plan.generation < ctx.lastGeneration) {
    return refuse('generation_rollback', `generation ${plan.generation} is below the last accepted generation ${ctx.lastGeneration}`)
  }
  return { ok: true, plan, kid }
}

/** Verifies one compact plan token; never throws on bad input. */
export async function verifyPlanToken(token: unknown, keys: PinnedKeys, ctx: VerifyContext): Promise<PlanVerdict> {
  if (typeof token !== 'string') return refuse('malformed_token', 'the token is not a string')
  const verified = await verifiedPayload(token, keys)
  if ('ok' in verified) return verified
  return checkClaims(verified.payload, verified.kid, ctx)
}
