/**
 * The two halves of a check-in as pure steps: the body a node sends (SPEC "Check-in"), and the verdict
 * on the answer (shape, signed plan, plain fields agreeing with it).
 */
import type { CheckinBody } from '../core/schemas.js'
import type { RefusalReason } from './agent-events.js'
import type { ShardHealth } from './agent-options.js'
import { plainFieldMismatch, type PlanClaims } from './plan-claims.js'
import type { PinnedKeys } from './pinned-keys.js'
import type { SessionEntry } from './session-deposits.js'
import { verifyPlanToken, type VerifyContext } from './plan-verifier.js'
import { checkinReplySchema } from './wire.js'

const MAX_COUNT = 128

function clampCount(n: number): number {
  return Number.isInteger(n) ? Math.min(Math.max(n, 0), MAX_COUNT) : 0
}

/**
 * The check-in body: counts clamped to the SPEC's range, `generation` only once a plan was applied,
 * `sessions` only when there are some.
 */
export function checkinBody(nodeId: string, capacity: number, health: ShardHealth, appliedGeneration: number | null, sessions: readonly SessionEntry[] = []): CheckinBody {
  return {
    node_id: nodeId,
    capacity,
    ready_shards: clampCount(health.ready_shards),
    starting_shards: clampCount(health.starting_shards),
    backoff_shards: clampCount(health.backoff_shards),
    fatal_shards: clampCount(health.fatal_shards),
    ...(appliedGeneration === null ? {} : { generation: appliedGeneration }),
    ...(sessions.length === 0 ? {} : { sessions: [...sessions] }),
  }
}

/** What a 200 answer to a check-in amounts to. */
export type CheckinVerdict =
  | { readonly kind: 'malformed' }
  | { readonly kind: 'refused'; readonly reason: RefusalReason; readonly detail: string; readonly leaseSeconds: number }
  | { readonly kind: 'accepted'; readonly plan: PlanClaims }

/** Checks the answer's shape, verifies its plan against the pinned keys, and compares the plain fields. */
export async function judgeCheckinAnswer(body: unknown, keys: PinnedKeys, ctx: VerifyContext): Promise<CheckinVerdict> {
  const parsed = checkinReplySchema.safeParse(body)
  if (!parsed.success) return { kind: 'malformed' }
  const answer = parsed.data
  const leaseSeconds = answer.lease_seconds
  const verdict = await verifyPlanToken(answer.plan_jws, keys, ctx)
  if (!verdict.ok) return { kind: 'refused', reason: verdict.reason, detail: verdict.detail, leaseSeconds }
  const mismatch = plainFieldMismatch(answer, verdict.plan)
  if (mismatch !== null) return { kind: 'refused', reason: 'plain_mismatch', detail: `the plain field ${mismatch} differs from the signed plan`, leaseSeconds }
  return { kind: 'accepted', plan: verdict.plan }
}
