/**
 * One Identify claim (SPEC "Identify claims", "Session handoff") as a ClaimReply; a refused certificate
 * is thrown. A resume grant's session is returned beside the outcome, never inside it.
 */
import { describe } from './agent-events.js'
import type { ClaimOutcome, ClaimReply } from './claim-scheduler.js'
import { CertificateRefusedError, type ControllerClient } from './controller-client.js'
import { identifyReplySchema } from './wire.js'

const only = (outcome: ClaimOutcome): ClaimReply => ({ outcome, resume: null })

/**
 * Sends `POST /v1/identify` (with `"fresh": true` when the host needs a new Identify); every answer
 * and failure becomes an outcome except CertificateRefusedError.
 */
export async function claimIdentify(client: ControllerClient, nodeId: string, shardId: number, fresh = false, set: 'current' | 'next' = 'current'): Promise<ClaimReply> {
  let reply
  try {
    // a live reshard's next set says so; the current set's claims are as before
    reply = await client.post('/v1/identify', { node_id: nodeId, shard_id: shardId, ...(fresh ? { fresh: true } : {}), ...(set === 'next' ? { set } : {}) })
  } catch (err) {
    if (err instanceof CertificateRefusedError) throw err
    return only({ kind: 'failed', detail: describe(err) })
  }
  if (reply.status === 429) return only({ kind: 'rate_limited', retryAfterMs: reply.retryAfterMs ?? 1000 })
  if (reply.status === 403 && reply.errorCode === 'not_owner') return only({ kind: 'not_owner' })
  if (reply.status !== 200) return only({ kind: 'failed', detail: `identify answered ${reply.status} ${reply.errorCode ?? ''}`.trim() })
  const parsed = identifyReplySchema.safeParse(reply.body)
  if (!parsed.success) return only({ kind: 'failed', detail: "the identify answer is not the SPEC's shape" })
  const answer = parsed.data
  if (!answer.granted) return only({ kind: 'wait', reason: answer.reason, retryAfterMs: answer.retry_after_ms })
  if (answer.mode !== 'resume') return only({ kind: 'granted', generation: answer.generation, mode: 'identify' })
  // A fresh claim must never be answered with a session: the host is about to IDENTIFY and needs the grant.
  if (fresh) return only({ kind: 'failed', detail: 'the controller answered a fresh claim with a resume' })
  const { session_id, sequence, resume_url } = answer.session
  return { outcome: { kind: 'granted', generation: answer.generation, mode: 'resume' }, resume: { sessionId: session_id, sequence, resumeUrl: resume_url } }
}
