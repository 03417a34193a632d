/**
 * An Identify claim, decided in the SPEC's order ("Identify claims"): the certificate on record, the set
 * claimed (a live reshard's next set goes to core/reshards.ts), ownership, the restart barrier, the
 * shard's handoff; then a held session is handed out (a RESUME: no bucket slot, no daily budget) unless
 * the claim is `fresh`; else the daily budget, then the bucket (core/identify-grants.ts).
 */
import { AppError } from '../errors.js'
import type { HandoffLedger } from './handoffs.js'
import { grantIdentify, handOutSession, type GrantDesk } from './identify-grants.js'
import type { LeaseHolders } from './lease-holders.js'
import type { Reshards } from './reshards.js'
import type { IdentifyBody } from './schemas.js'
import type { IdentifyOutcome } from './types.js'

/** What a claim reads of the controller, besides what a grant changes. */
export interface ClaimDesk extends GrantDesk {
  readonly holders: LeaseHolders
  readonly reshards: Reshards
  readonly handoffs: HandoffLedger
  readonly totalShards: number
  readonly leaseMs: number
  ownerOf(shardId: number): string | null
}

/** Decides a claim presented with the certificate `serial` (expired leases gone and the plan settled first). */
export function decideClaim(desk: ClaimDesk, now: number, body: IdentifyBody, serial: string): IdentifyOutcome {
  const record = desk.holders.live.get(body.node_id)
  if (record !== undefined && record.certSerial !== serial) {
    // a superseded certificate, or a newer one that has not checked in: only the record's may act (and take sessions)
    throw new AppError('identity_conflict', `node ${body.node_id} is live with another certificate: claims are served to the certificate of its last accepted check-in (check in with this one first)`)
  }
  if (body.set === 'next' && !desk.reshards.nextClaimIsCurrent()) {
    return desk.reshards.claimNext(now, body, () => grantIdentify(desk, now, body.node_id, body.shard_id, 'next'))
  }
  const shardId = body.shard_id
  if (shardId >= desk.totalShards) {
    throw new AppError('invalid_request', `shard_id must be below total_shards (${desk.totalShards})`)
  }
  if (desk.ownerOf(shardId) !== body.node_id) {
    throw new AppError('not_owner', `shard ${shardId} is not assigned to ${body.node_id} in generation ${desk.generation}`)
  }
  const barrierWaitMs = desk.reshards.barrierWaitMs(now)
  if (barrierWaitMs !== null) return { granted: false, reason: 'handoff_pending', retryAfterMs: barrierWaitMs }
  const handoffWaitMs = desk.handoffs.waitMs(shardId, (nodeId) => desk.holders.leaseFrom(nodeId), desk.leaseMs, now)
  if (handoffWaitMs !== null) return { granted: false, reason: 'handoff_pending', retryAfterMs: handoffWaitMs }
  return handOutSession(desk, now, body.node_id, shardId, body.fresh === true) ?? grantIdentify(desk, now, body.node_id, shardId, 'current')
}
