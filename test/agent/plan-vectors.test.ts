// Every vector of test/vectors/plan-jws.json through the agent's own verifier, plus checks on the file.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { PinnedKeys } from '../../src/agent/pinned-keys.js'
import { PLAN_REFUSAL_REASONS, verifyPlanToken } from '../../src/agent/plan-verifier.js'

const text = readFileSync(new URL('../vectors/plan-jws.json', import.meta.url), 'utf8')
const file = JSON.parse(text) as {
  reasons: string[]
  vectors: {
    name: string
    jwks: unknown
    token: string
    node_id: string
    now: number
    clock_skew_seconds: number
    last_generation: number | null
    expect: { accept: true; plan: Record<string, unknown> } | { accept: false; reason: string }
  }[]
}

for (const v of file.vectors) {
  t.test(v.name, async (t) => {
    const keys = await PinnedKeys.fromJwks(v.jwks)
    const verdict = await verifyPlanToken(v.token, keys, {
      nodeId: v.node_id,
      nowMs: v.now * 1000,
      lastGeneration: v.last_generation,
      clockSkewMs: v.clock_skew_seconds * 1000,
    })
    if (v.expect.accept) {
      t.ok(verdict.ok, `accepted${verdict.ok ? '' : ` (refused: ${verdict.reason} ${verdict.detail})`}`)
      if (verdict.ok) t.same(verdict.plan, v.expect.plan, 'with the expected plan fields')
    } else {
      t.notOk(verdict.ok, 'refused')
      if (!verdict.ok) t.equal(verdict.reason, v.expect.reason, verdict.detail)
    }
  })
}

t.test('the file covers the cases issue 12 lists and every refusal reason', async (t) => {
  const names = new Set(file.vectors.map((v) => v.name))
  for (const name of ['valid', 'valid_previous_key_during_rotation', 'tampered_payload', 'tampered_signature', 'alg_none', 'alg_hs256_public_key_as_secret', 'wrong_typ', 'unknown_kid', 'wrong_subject', 'expired', 'generation_rollback', 'inconsistent_assigned', 'inconsistent_exp']) {
    t.ok(names.has(name), name)
  }
  t.same(file.reasons, [...PLAN_REFUSAL_REASONS], 'the reasons listed are the verifier\'s, in its order')
  const used = new Set(file.vectors.flatMap((v) => (v.expect.accept ? [] : [v.expect.reason])))
  for (const reason of PLAN_REFUSAL_REASONS) t.ok(used.has(reason), `some vector is refused with ${reason}`)
})

t.test('the file holds no private key', async (t) => {
  t.notMatch(text, /"d"\s*:/, 'no JWK "d" member')
  t.notMatch(text, /PRIVATE KEY/, 'no PEM private key')
})
