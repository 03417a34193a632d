// The controller reads plan-keys.json exactly as the toolkit writes it, and refuses anything else.
import t from 'tap'
import { newPlanKey, rotatedPlanKeys } from '../../pki/plan-keys.js'
import { parsePlanKeys } from '../../src/signing/plan-keys.js'

const first = await newPlanKey()
const second = await newPlanKey()
const file = rotatedPlanKeys(rotatedPlanKeys(null, first), second)

t.test('a rotated file: signs with the current key, publishes current then previous, no private part', async (t) => {
  const keys = await parsePlanKeys(file, 'plan-keys.json')
  t.equal(keys.kid, second.kid)
  t.same(keys.jwks.keys.map((k) => k.kid), [second.kid, first.kid])
  for (const k of keys.jwks.keys) t.notOk('d' in k, 'no private member published')
  t.equal(keys.privateKey.asymmetricKeyType, 'ed25519')
})

t.test('bad plan-keys files are refused with the source named', async (t) => {
  const cases: [string, unknown, RegExp][] = [
    ['unknown top-level field', { ...file, extra: 1 }, /plan-keys\.json: not a plan-keys file/],
    ['unknown JWK field', { ...file, keys: [{ ...second, p: 'x' }] }, /not a plan-keys file/],
    ['current names no key', { ...file, current: 'nope' }, /not a plan-keys file/],
    ['three keys', { ...file, keys: [second, first, first] }, /not a plan-keys file/],
    ['not Ed25519', { ...file, keys: [{ ...second, crv: 'X25519' }] }, /not a plan-keys file/],
    ['kid that is not the thumbprint', { current: 'forged', keys: [{ ...second, kid: 'forged' }] }, /not its RFC 7638 thumbprint/],
  ]
  for (const [label, raw, pattern] of cases) await t.rejects(parsePlanKeys(raw, 'plan-keys.json'), pattern, label)
})

t.test('a key whose public x is not the public key of its private d is refused (issue 9 item 11)', async (t) => {
  // x and kid of one key, d of another: every shape and thumbprint check passes, but Node would sign
  // with d, so the published kid would name a key that verifies nothing.
  const spliced = { ...second, d: first.d }
  await t.rejects(parsePlanKeys({ current: second.kid, keys: [spliced] }, 'plan-keys.json'), /plan-keys\.json: key \S+: its public "x" is not the public key of its private "d"/)
  const previousSpliced = { ...first, d: second.d }
  await t.rejects(parsePlanKeys({ current: second.kid, keys: [second, previousSpliced] }, 'plan-keys.json'), /not the public key of its private "d"/, 'the previous key too')
  const notAKey = { ...second, d: 'AAAA' }
  await t.rejects(parsePlanKeys({ current: second.kid, keys: [notAKey] }, 'plan-keys.json'), /not the public key of its private "d"/, 'a d that is no Ed25519 key')
})
