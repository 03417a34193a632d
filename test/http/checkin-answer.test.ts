// The check-in answer built from fragments is byte for byte what JSON.stringify gives for the SPEC's
// objects, and its plan_jws carries exactly the plain values.
import t from 'tap'
import { compactVerify, createLocalJWKSet } from 'jose'
import { newPlanKey, rotatedPlanKeys } from '../../pki/plan-keys.js'
import { checkinAnswer, assignedJson } from '../../src/http/checkin-answer.js'
import { parsePlanKeys } from '../../src/signing/plan-keys.js'
import { PlanSigner } from '../../src/signing/plan-signer.js'
import type { CheckinOutcome } from '../../src/core/types.js'

const signer = new PlanSigner(await parsePlanKeys(rotatedPlanKeys(null, await newPlanKey()), 'plan-keys.json'))
const jwks = createLocalJWKSet({ keys: [...signer.jwks.keys] })
const list = (start: number, count: number) => Array.from({ length: count }, (_, i) => start + i)

t.test('same bytes as JSON.stringify of the SPEC objects, for many ranges and odd controller IDs', async (t) => {
  const cases: Array<[number, number, string, string]> = [
    [0, 16, 'pxe-controller-1', 'compaq-01'],
    [65_520, 16, 'ctl "quoted" \\ back', 'node.x_9'],
    [300, 0, 'c', 'n'],
    [7, 128, 'ünïcode-host', 'A'],
  ]
  for (const [rangeStart, rangeCount, controllerId, nodeId] of cases) {
    const out: CheckinOutcome = { generation: 12, totalShards: 65_536, leaseSeconds: 30, maxConcurrency: 16, rangeStart, rangeCount, rotated: false, previousSerial: null, next: null, rest: null }
    const now = 1_800_000_123_456
    const text = checkinAnswer(out, nodeId, controllerId, now, signer)
    const answer = JSON.parse(text)
    const iat = Math.floor(now / 1000)
    const expectedClaims = { iss: controllerId, sub: nodeId, iat, exp: iat + 30, generation: 12, total_shards: 65_536, range_start: rangeStart, range_count: rangeCount, assigned: list(rangeStart, rangeCount), lease_seconds: 30, max_concurrency: 16 }
    const expectedAnswer = { generation: 12, total_shards: 65_536, assigned: list(rangeStart, rangeCount), range_start: rangeStart, range_count: rangeCount, lease_seconds: 30, max_concurrency: 16, plan_jws: answer.plan_jws }
    t.equal(text, JSON.stringify(expectedAnswer), `answer bytes for ${rangeStart}+${rangeCount}`)
    const { payload } = await compactVerify(answer.plan_jws, jwks)
    t.equal(new TextDecoder().decode(payload), JSON.stringify(expectedClaims), 'signed payload bytes')
  }
})

t.test('the next set of a live reshard: the same object in the signed payload and the plain answer', async (t) => {
  const out: CheckinOutcome = { generation: 7, totalShards: 8, leaseSeconds: 30, maxConcurrency: 4, rangeStart: 4, rangeCount: 4, rotated: false, previousSerial: null, next: { totalShards: 16, rangeStart: 8, rangeCount: 8 }, rest: null }
  const now = 1_800_000_000_000
  const text = checkinAnswer(out, 'n2', 'ctl', now, signer)
  const answer = JSON.parse(text)
  const next = { total_shards: 16, range_start: 8, range_count: 8, assigned: list(8, 8) }
  t.same(answer.next, next, 'plain answer')
  const iat = Math.floor(now / 1000)
  const expectedClaims = { iss: 'ctl', sub: 'n2', iat, exp: iat + 30, generation: 7, total_shards: 8, range_start: 4, range_count: 4, assigned: list(4, 4), lease_seconds: 30, max_concurrency: 4, next }
  const { payload } = await compactVerify(answer.plan_jws, jwks)
  t.equal(new TextDecoder().decode(payload), JSON.stringify(expectedClaims), 'signed payload bytes')
})

t.test('a REST share: the same object in the signed payload and the plain answer, after next', async (t) => {
  const untilMs = 1_800_000_030_000
  const out: CheckinOutcome = { generation: 7, totalShards: 8, leaseSeconds: 30, maxConcurrency: 4, rangeStart: 4, rangeCount: 4, rotated: false, previousSerial: null, next: { totalShards: 16, rangeStart: 8, rangeCount: 8 }, rest: { perSecond: 11.25, invalidBudget: 2250, untilMs } }
  const now = 1_800_000_000_000
  const text = checkinAnswer(out, 'n2', 'ctl', now, signer)
  const answer = JSON.parse(text)
  const rest = { per_second: 11.25, invalid_budget: 2250, until: new Date(untilMs).toISOString() }
  const next = { total_shards: 16, range_start: 8, range_count: 8, assigned: list(8, 8) }
  const expectedAnswer = { generation: 7, total_shards: 8, assigned: list(4, 4), range_start: 4, range_count: 4, lease_seconds: 30, max_concurrency: 4, next, rest, plan_jws: answer.plan_jws }
  t.equal(text, JSON.stringify(expectedAnswer), 'answer bytes')
  const iat = Math.floor(now / 1000)
  const expectedClaims = { iss: 'ctl', sub: 'n2', iat, exp: iat + 30, generation: 7, total_shards: 8, range_start: 4, range_count: 4, assigned: list(4, 4), lease_seconds: 30, max_concurrency: 4, next, rest }
  const { payload } = await compactVerify(answer.plan_jws, jwks)
  t.equal(new TextDecoder().decode(payload), JSON.stringify(expectedClaims), 'signed payload bytes')
  t.equal(rest.until, '2027-01-15T08:00:30.000Z', 'until is ISO 8601 in UTC')
})

t.test('the assigned text cache gives the same text again and stays bounded', async (t) => {
  t.equal(assignedJson(5, 3), '[5,6,7]')
  t.equal(assignedJson(5, 3), '[5,6,7]')
  t.equal(assignedJson(65_535, 1), '[65535]')
  for (let i = 0; i < 20_000; i++) assignedJson(i % 65_536, 1)
  t.equal(assignedJson(5, 3), '[5,6,7]', 'still right after the cache was cleared')
})
