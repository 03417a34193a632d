/**
 * The check-in answer, serialized once: the signed payload and the plain answer carry the same values,
 * so their JSON is built from one set of fragments, and the `assigned` list's text (up to 128 numbers)
 * comes from a cache keyed by range (ranges change rarely; every check-in used to build it twice).
 * Key order and values are exactly what JSON.stringify of the SPEC's objects gives (a test checks).
 */
import type { CheckinOutcome } from '../core/types.js'
import type { PlanSigner } from '../signing/plan-signer.js'

const MAX_CACHED_RANGES = 16_384
const assignedTexts = new Map<number, string>()

/** `[start, start+1, ..., start+count-1]` as JSON text, cached. */
export function assignedJson(start: number, count: number): string {
  const key = start * 256 + count // count <= 128, start <= 65535: unique and exact as a double
  let text = assignedTexts.get(key)
  if (text === undefined) {
    const parts = new Array<number>(count)
    for (let i = 0; i < count; i++) parts[i] = start + i
    text = `[${parts.join(',')}]`
    if (assignedTexts.size >= MAX_CACHED_RANGES) assignedTexts.clear() // bounded; refills with the ranges in use
    assignedTexts.set(key, text)
  }
  return text
}

/** The answer body of a check-in, with its signed plan. */
export function checkinAnswer(out: CheckinOutcome, nodeId: string, controllerId: string, nowMs: number, signer: PlanSigner): string {
  const iat = Math.floor(nowMs / 1000)
  const assigned = assignedJson(out.rangeStart, out.rangeCount)
  // A live reshard's next set, in the signed payload and the plain answer alike (absent without one).
  const next =
    out.next === null
      ? ''
      : `,"next":{"total_shards":${out.next.totalShards},"range_start":${out.next.rangeStart},"range_count":${out.next.rangeCount},"assigned":${assignedJson(out.next.rangeStart, out.next.rangeCount)}}`
  // The node's REST share (SPEC "REST budget"), signed with the plan (absent when the controller shares none).
  const rest = out.rest === null ? '' : `,"rest":{"per_second":${out.rest.perSecond},"invalid_budget":${out.rest.invalidBudget},"until":"${new Date(out.rest.untilMs).toISOString()}"}`
  const payload =
    `{"iss":${JSON.stringify(controllerId)},"sub":${JSON.stringify(nodeId)},"iat":${iat},"exp":${iat + out.leaseSeconds},` +
    `"generation":${out.generation},"total_shards":${out.totalShards},"range_start":${out.rangeStart},"range_count":${out.rangeCount},` +
    `"assigned":${assigned},"lease_seconds":${out.leaseSeconds},"max_concurrency":${out.maxConcurrency}${next}${rest}}`
  const planJws = signer.signPayload(payload)
  return (
    `{"generation":${out.generation},"total_shards":${out.totalShards},"assigned":${assigned},"range_start":${out.rangeStart},` +
    `"range_count":${out.rangeCount},"lease_seconds":${out.leaseSeconds},"max_concurrency":${out.maxConcurrency}${next}${rest},"plan_jws":"${planJws}"}`
  )
}
