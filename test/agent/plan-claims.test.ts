// The plain check-in fields must repeat the signed claims exactly; a token that is not even a string is refused.
import t from 'tap'
import { plainFieldMismatch, type PlanClaims } from '../../src/agent/plan-claims.js'
import { PinnedKeys } from '../../src/agent/pinned-keys.js'
import { verifyPlanToken } from '../../src/agent/plan-verifier.js'
import { readFileSync } from 'node:fs'

const claims: PlanClaims = {
  iss: 'c', sub: 'node-a', iat: 100, exp: 130, generation: 3, total_shards: 8, range_start: 2, range_count: 2,
  assigned: [2, 3], lease_seconds: 30, max_concurrency: 2,
}
const plain = { generation: 3, total_shards: 8, assigned: [2, 3], range_start: 2, range_count: 2, lease_seconds: 30, max_concurrency: 2 }

t.test('plain fields equal to the claims pass; any difference names the field', async (t) => {
  t.equal(plainFieldMismatch(plain, claims), null)
  t.equal(plainFieldMismatch({ ...plain, generation: 4 }, claims), 'generation')
  t.equal(plainFieldMismatch({ ...plain, assigned: [2, 4] }, claims), 'assigned')
  t.equal(plainFieldMismatch({ ...plain, assigned: [2] }, claims), 'assigned')
  t.equal(plainFieldMismatch({ ...plain, lease_seconds: 60 }, claims), 'lease_seconds')
  t.equal(plainFieldMismatch({ ...plain, max_concurrency: 1 }, claims), 'max_concurrency')
})

t.test('a token that is not a string, or is far too long, is malformed', async (t) => {
  const vectors = JSON.parse(readFileSync(new URL('../vectors/plan-jws.json', import.meta.url), 'utf8'))
  const keys = await PinnedKeys.fromJwks(vectors.vectors[0].jwks)
  const ctx = { nodeId: 'node-a', nowMs: 0, lastGeneration: null, clockSkewMs: 0 }
  for (const token of [undefined, 42, { a: 1 }, 'a'.repeat(70_000) + '.b.c']) {
    const verdict = await verifyPlanToken(token, keys, ctx)
    t.equal(verdict.ok ? 'accepted' : verdict.reason, 'malformed_token', typeof token)
  }
})
