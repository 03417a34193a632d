// The hot-path signer (node:crypto, synchronous) makes plans that jose, the format's reference, verifies
// against the bundle's JWKS, with exactly the SPEC's protected header; also across a plan-key rotation.
import t from 'tap'
import { compactVerify, createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose'
import { newPlanKey, rotatedPlanKeys } from '../../pki/plan-keys.js'
import { parsePlanKeys } from '../../src/signing/plan-keys.js'
import { PLAN_JWS_TYPE, PlanSigner, type PlanClaims } from '../../src/signing/plan-signer.js'

const now = Math.floor(Date.now() / 1000)
const claims = (generation: number): PlanClaims => ({
  iss: 'pxe-controller-1', sub: 'compaq-01', iat: now, exp: now + 30, generation, total_shards: 64,
  range_start: 0, range_count: 4, assigned: [0, 1, 2, 3], lease_seconds: 30, max_concurrency: 16,
})

const first = await newPlanKey()
const second = await newPlanKey()
const oneKey = rotatedPlanKeys(null, first)
const rotated = rotatedPlanKeys(oneKey, second)

t.test('jose verifies what the signer makes, with the SPEC header, under the published JWKS', async (t) => {
  const keys = await parsePlanKeys(oneKey, 'plan-keys.json')
  const signer = new PlanSigner(keys)
  const token = signer.signPayload(JSON.stringify(claims(7)))
  t.same(decodeProtectedHeader(token), { alg: 'EdDSA', typ: PLAN_JWS_TYPE, kid: first.kid }, 'exactly alg, typ and kid')
  const jwks = createLocalJWKSet({ keys: [...signer.jwks.keys] })
  const { payload } = await jwtVerify(token, jwks, { algorithms: ['EdDSA'], typ: PLAN_JWS_TYPE, subject: 'compaq-01', issuer: 'pxe-controller-1' })
  t.match(payload, claims(7))
  const { payload: raw } = await compactVerify(token, jwks)
  t.same(JSON.parse(new TextDecoder().decode(raw)), claims(7), 'the payload is the claims, byte for byte as JSON')
  const tampered = token.replace(/\.[^.]+\./, `.${Buffer.from(JSON.stringify(claims(8))).toString('base64url')}.`)
  await t.rejects(compactVerify(tampered, jwks), 'a changed payload fails')
})

t.test('after a rotation: new plans under the new key, old plans still verify while the old key is published', async (t) => {
  const before = new PlanSigner(await parsePlanKeys(oneKey, 'plan-keys.json')).signPayload(JSON.stringify(claims(1)))
  // A rotation is a restart on the rotated plan-keys.json.
  const signer = new PlanSigner(await parsePlanKeys(rotated, 'plan-keys.json'))
  const after = signer.signPayload(JSON.stringify(claims(2)))
  t.equal(decodeProtectedHeader(after).kid, second.kid, 'signed with the new key')
  t.same(signer.jwks.keys.map((k) => k.kid), [second.kid, first.kid], 'both published, current first')
  const bundleJwks = createLocalJWKSet({ keys: [...signer.jwks.keys] })
  t.equal((await jwtVerify(after, bundleJwks, { algorithms: ['EdDSA'] })).payload.generation, 2)
  t.equal((await jwtVerify(before, bundleJwks, { algorithms: ['EdDSA'] })).payload.generation, 1)
  const onlyOld = createLocalJWKSet({ keys: [signer.jwks.keys[1]!] })
  await t.rejects(jwtVerify(after, onlyOld, { algorithms: ['EdDSA'] }), 'a node pinning only the old key refuses the new plans')
})
