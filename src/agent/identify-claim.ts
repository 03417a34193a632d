/** One Identify claim (SPEC "Identify claims") as a ClaimOutcome; a refused certificate is thrown. */
import { describe } from './agent-events.js'
import type { ClaimOutcome } from './claim-scheduler.js'
import { CertificateRefusedError, type ControllerClient } from './controller-client.js'
import { identifyReplySchema } from './wire.js'

/** Sends `POST /v1/identify`; every answer and failure becomes an outcome except CertificateRefusedError. */
export async function claimIdentify(client: ControllerClient, nodeId: string, shardId: number): Promise<ClaimOutcome> {
  let reply
  try {
    reply = await client.post('/v1/identify', { node_id: nodeId, shard_id: shardId })
  } catch (err) {
    if (err instanceof CertificateRefusedError) throw err
    return { kind: 'failed', detail: describe(err) }
  }
  if (reply.status === 429) return { kind: 'rate_limited', retryAfterMs: reply.retryAfterMs ?? 1000 }
  if (reply.status === 403 && reply.errorCode === 'not_owner') return { kind: 'not_owner' }
  if (reply.status !== 200) return { kind: 'failed', detail: `identify answered ${reply.status} ${reply.errorCode ?? ''}`.trim() }
  const parsed = identifyReplySchema.safeParse(reply.body)
  if (!parsed.success) return { kind: 'failed', detail: "the identify answer is not the SPEC's shape" }
  const answer = parsed.data
  if (answer.granted) return { kind: 'granted', generation: answer.generation }
  return { kind: 'wait', reason: answer.reason, retryAfterMs: answer.retry_after_ms }
}
