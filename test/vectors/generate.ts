/**
 * Writes test/vectors/plan-jws.json: plan tokens with the verdict a node must reach (SPEC "Signed
 * plans"). Run by hand (`npm run vectors`) after a change to the plan format or the rules. The keys
 * are made here and thrown away: only public keys and tokens are written, never a private key.
 */
import { createHmac, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { CompactSign, base64url, calculateJwkThumbprint } from 'jose'
import { PlanSigner, PLAN_JWS_TYPE, type PlanClaims } from '../../src/signing/plan-signer.js'

interface Key {
  readonly kid: string
  readonly privateKey: KeyObject
  readonly jwk: { kty: 'OKP'; crv: 'Ed25519'; x: string; kid: string; alg: 'EdDSA'; use: 'sig' }
}

async function newKey(): Promise<Key> {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  const x = publicKey.export({ format: 'jwk' }).x!
  const kid = await calculateJwkThumbprint({ kty: 'OKP', crv: 'Ed25519', x }, 'sha256')
  return { kid, privateKey, jwk: { kty: 'OKP', crv: 'Ed25519', x, kid, alg: 'EdDSA', use: 'sig' } }
}

const NODE = 'compaq-01'
const NOW = 1_767_225_600 // 2026-01-01T00:00:00Z
const IAT = NOW - 10
const BASE: PlanClaims = {
  iss: 'pxe-controller-1',
  sub: NODE,
  iat: IAT,
  exp: IAT + 30,
  generation: 7,
  total_shards: 64,
  range_start: 16,
  range_count: 16,
  assigned: Array.from({ length: 16 }, (_, i) => 16 + i),
  lease_seconds: 30,
  max_concurrency: 16,
}

const current = await newKey()
const previous = await newKey()
const foreign = await newKey()
const jwks = { keys: [current.jwk, previous.jwk] }
const encoder = new TextEncoder()

/** Signs arbitrary payload bytes with any header: for tokens the controller would never make. */
function signRaw(key: Key, header: Record<string, unknown>, payload: unknown): Promise<string> {
  const bytes = typeof payload === 'string' ? encoder.encode(payload) : encoder.encode(JSON.stringify(payload))
  return new CompactSign(bytes).setProtectedHeader({ alg: 'EdDSA', ...header }).sign(key.privateKey)
}

/** Signs the way the controller does (its own PlanSigner). */
function signPlan(key: Key, claims: PlanClaims): Promise<string> {
  return Promise.resolve(new PlanSigner({ kid: key.kid, privateKey: key.privateKey, jwks }).signPayload(JSON.stringify(claims)))
}

const header = (key: Key) => ({ typ: PLAN_JWS_TYPE, kid: key.kid })
const segments = (token: string) => token.split('.') as [string, string, string]
const b64json = (value: unknown) => base64url.encode(JSON.stringify(value))

type Expect = { accept: true; plan: PlanClaims } | { accept: false; reason: string }
interface Vector {
  name: string
  description: string
  token: string
  now?: number
  last_generation?: number | null
  clock_skew_seconds?: number
  node_id?: string
  expect: Expect
}

const valid = await signPlan(current, BASE)
const other = await signPlan(current, { ...BASE, generation: 8 })
const [h, p, s] = segments(valid)
const flipped = base64url.decode(s)
flipped[0] = flipped[0]! ^ 0x01
const hsHeader = b64json({ alg: 'HS256', typ: PLAN_JWS_TYPE, kid: current.kid })
const hsInput = `${hsHeader}.${p}`
const hsSig = base64url.encode(createHmac('sha256', base64url.decode(current.jwk.x)).update(hsInput).digest())
const refuse = (reason: string): Expect => ({ accept: false, reason })

const vectors: Vector[] = [
  { name: 'valid', description: 'a plan signed by the current key, as the controller makes it', token: valid, expect: { accept: true, plan: BASE } },
  { name: 'valid_first_plan', description: 'no plan accepted before (last_generation null)', token: valid, last_generation: null, expect: { accept: true, plan: BASE } },
  { name: 'valid_same_generation', description: 'generation equal to the last accepted one (a renewal)', token: valid, last_generation: 7, expect: { accept: true, plan: BASE } },
  { name: 'valid_previous_key_during_rotation', description: 'signed by the previous key, still pinned during a rotation', token: await signPlan(previous, BASE), expect: { accept: true, plan: BASE } },
  { name: 'valid_within_clock_skew', description: 'now is 2 s past exp, within a 5 s clock-skew allowance', token: valid, now: BASE.exp + 2, clock_skew_seconds: 5, expect: { accept: true, plan: BASE } },
  { name: 'tampered_payload', description: 'the payload of another plan (generation 8) under the signature of this one', token: `${h}.${segments(other)[1]}.${s}`, expect: refuse('bad_signature') },
  { name: 'tampered_signature', description: 'one bit of the signature flipped', token: `${h}.${p}.${base64url.encode(flipped)}`, expect: refuse('bad_signature') },
  { name: 'signed_by_other_pinned_key', description: "signed by the previous key but naming the current key's kid", token: await signRaw(previous, header(current), BASE), expect: refuse('bad_signature') },
  { name: 'alg_none', description: 'alg "none" with an empty signature', token: `${b64json({ alg: 'none', typ: PLAN_JWS_TYPE, kid: current.kid })}.${p}.`, expect: refuse('alg_not_allowed') },
  { name: 'alg_hs256_public_key_as_secret', description: "HS256 with the current key's raw 32 public-key bytes as the HMAC secret (key confusion)", token: `${hsInput}.${hsSig}`, expect: refuse('alg_not_allowed') },
  { name: 'wrong_typ', description: 'typ "JWT" instead of pxe-plan+jwt', token: await signRaw(current, { typ: 'JWT', kid: current.kid }, BASE), expect: refuse('wrong_typ') },
  { name: 'missing_typ', description: 'no typ in the protected header', token: await signRaw(current, { kid: current.kid }, BASE), expect: refuse('wrong_typ') },
  { name: 'unknown_kid', description: 'signed by a key that is not pinned, under its own kid', token: await signPlan(foreign, BASE), expect: refuse('unknown_kid') },
  { name: 'missing_kid', description: 'no kid in the protected header', token: await signRaw(current, { typ: PLAN_JWS_TYPE }, BASE), expect: refuse('unknown_kid') },
  { name: 'wrong_subject', description: 'a valid plan for another node', token: await signPlan(current, { ...BASE, sub: 'compaq-02' }), expect: refuse('wrong_subject') },
  { name: 'expired', description: 'now is a minute past exp', token: valid, now: BASE.exp + 60, expect: refuse('expired') },
  { name: 'expired_at_exp', description: 'now equals exp exactly (exp must be in the future)', token: valid, now: BASE.exp, expect: refuse('expired') },
  { name: 'generation_rollback', description: 'generation 7 after generation 8 was accepted (a replay or a rolled-back controller)', token: valid, last_generation: 8, expect: refuse('generation_rollback') },
  { name: 'inconsistent_assigned', description: 'assigned does not match range_start/range_count', token: await signPlan(current, { ...BASE, assigned: [...BASE.assigned.slice(0, 15), 63] }), expect: refuse('inconsistent_claims') },
  { name: 'inconsistent_exp', description: 'exp is not iat + lease_seconds', token: await signPlan(current, { ...BASE, exp: BASE.iat + 3600 }), expect: refuse('inconsistent_claims') },
  { name: 'inconsistent_range', description: 'the range runs past total_shards', token: await signPlan(current, { ...BASE, range_start: 56, assigned: Array.from({ length: 16 }, (_, i) => 56 + i) }), expect: refuse('inconsistent_claims') },
  { name: 'unknown_claim', description: 'an extra claim the controller never signs', token: await signRaw(current, header(current), { ...BASE, admin: true }), expect: refuse('malformed_payload') },
  { name: 'string_generation', description: 'generation as a string', token: await signRaw(current, header(current), { ...BASE, generation: '7' }), expect: refuse('malformed_payload') },
  { name: 'payload_not_json', description: 'a signed payload that is not JSON', token: await signRaw(current, header(current), 'generation=7'), expect: refuse('malformed_payload') },
  { name: 'not_a_jws', description: 'two segments only', token: `${h}.${p}`, expect: refuse('malformed_token') },
]

const file = {
  description: 'Plan verification vectors for Discord-PXE nodes (SPEC "Signed plans"). Generated by test/vectors/generate.ts; see test/vectors/README.md.',
  format: 1,
  reasons: ['malformed_token', 'alg_not_allowed', 'wrong_typ', 'unknown_kid', 'bad_signature', 'malformed_payload', 'wrong_subject', 'inconsistent_claims', 'expired', 'generation_rollback'],
  vectors: vectors.map((v) => ({
    name: v.name,
    description: v.description,
    jwks,
    token: v.token,
    node_id: v.node_id ?? NODE,
    now: v.now ?? NOW,
    clock_skew_seconds: v.clock_skew_seconds ?? 0,
    last_generation: v.last_generation === undefined ? 6 : v.last_generation,
    expect: v.expect,
  })),
}

const out = fileURLToPath(new URL('./plan-jws.json', import.meta.url))
writeFileSync(out, JSON.stringify(file, null, 2) + '\n')
console.log(`wrote ${vectors.length} vectors to ${out}`)
