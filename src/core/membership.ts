/**
 * Who is in the plan (SPEC "Check-in", "Leases"): a check-in registers or renews a node and releases what
 * its reported generation acknowledges; an expired lease drops the node with everything it had to hand
 * off; a revoked node is dropped at once, but what it had to hand off waits for its lease (a revoked node
 * may be cut off and still running its shards). The controller (core/controller.ts) owns the parts and
 * re-plans; this module decides who joins, who leaves and who drains, and what each departure releases.
 */
import { AppError } from '../errors.js'
import { assertCheckinAccepted } from './checkin-refusals.js'
import type { HandoffLedger } from './handoffs.js'
import type { LeaseHolders } from './lease-holders.js'
import type { LivePlan } from './live-plan.js'
import { isValidName, nameProblem } from './names.js'
import { NO_NODE, type NodeIndex } from './node-index.js'
import { newNodeRecord, renewRecord, type NodeRecord } from './node-record.js'
import type { Reshards } from './reshards.js'
import { canonicalResumeUrl } from './resume-url.js'
import type { CheckinBody } from './schemas.js'
import { assertDepositAccepted } from './session-deposit.js'
import type { SessionVault } from './session-vault.js'
import type { StateTracker } from './state-tracker.js'
import type { CertRef, CoreEvent, DrainOutcome, Registration } from './types.js'

/** The controller's parts and steps membership works with (getters where a reshard's switch replaces a part). */
export interface MembershipHost {
  readonly holders: LeaseHolders
  readonly draining: Set<string>
  readonly nodes: NodeIndex
  readonly sessions: SessionVault
  readonly tracker: StateTracker
  readonly reshards: Reshards
  readonly allowedResumeHosts: readonly string[]
  readonly leaseMs: number
  readonly handoffs: HandoffLedger
  readonly plan: LivePlan
  readonly totalShards: number
  readonly generation: number
  /** True while a join, a departure or a capacity change waits for settle(). */
  stale: boolean
  emit(event: CoreEvent): void
  markDurable(): void
  replan(): void
  settle(): void
  /** The node that owns a shard in the current plan, or null. */
  ownerOf(shardId: number): string | null
}

/** How long a leave is shown in the plan view (pxe-ctl status counts recent leaves), and how many at most. */
export const RECENT_LEAVE_MS = 60 * 60 * 1000
const RECENT_LEAVES_KEPT = 1000

/** Joins, renewals and departures of a controller's nodes. */
export class Membership {
  /** Leaves on purpose, oldest first (memory only). */
  private readonly leaves: { nodeId: string; at: number }[] = []

  constructor(private readonly host: MembershipHost) {}

  /** The leaves within RECENT_LEAVE_MS of `now`, newest first. */
  recentLeaves(now: number): { nodeId: string; at: number }[] {
    while (this.leaves.length > 0 && now - this.leaves[0]!.at > RECENT_LEAVE_MS) this.leaves.shift()
    return [...this.leaves].reverse()
  }

  /**
   * Registers or renews a node (body already validated and bound to the certificate's CN). A join or a
   * capacity change only marks the plan stale; settle() re-plans once for all of them.
   */
  checkin(now: number, body: CheckinBody, cert: CertRef): Registration {
    const host = this.host
    this.expire(now)
    const existing = host.holders.live.get(body.node_id)
    assertCheckinAccepted(existing, body, cert, host.generation)
    if (body.leaving === true) return this.leave(now, body, cert, existing)
    const deposit = body.sessions ?? []
    if (deposit.length > 0) {
      // Read before the check-in releases anything: a deposit must name handoffs this check-in releases.
      assertDepositAccepted(deposit, {
        nodeIndexId: existing === undefined ? undefined : host.nodes.find(body.node_id),
        reportedGeneration: body.generation,
        totalShards: host.totalShards,
        handoffs: host.handoffs,
        allowedHosts: host.allowedResumeHosts,
        revokedUpTo: host.holders.revokedUpTo(body.node_id),
      })
    }
    const rotated = existing !== undefined && existing.certSerial !== cert.serial
    const record = existing ?? newNodeRecord(now, body, cert)
    host.nodes.idOf(record.nodeId) // every live node has an ID (see Controller.replan)
    if (existing === undefined) {
      host.plan.join(record.nodeId)
      host.reshards.join(record.nodeId)
    }
    const previousSerial = rotated ? record.certSerial : null
    if (existing === undefined || record.capacity !== body.capacity) host.stale = true
    const reportedBefore = record.reportedGeneration
    const changed = this.updateRecord(record, now, body, cert)
    if (rotated) host.emit({ kind: 'node_rotated', nodeId: record.nodeId, fromSerial: previousSerial!, toSerial: cert.serial })
    host.holders.renew(record) // to the back of the lastSeen order: expiry looks at the head only
    if (changed.record || existing === undefined) this.touchNode(record.nodeId)
    else {
      if (changed.state) host.markDurable()
      if (record.reportedGeneration !== reportedBefore) host.tracker.report(record.nodeId) // written in the background: no answer waits for it
    }
    for (const entry of deposit) {
      // held as rebuilt from its parts: the next owner never sees the depositor's own spelling
      host.sessions.deposit(now, entry.shard_id, record.nodeId, { sessionId: entry.session_id, sequence: entry.sequence, resumeUrl: canonicalResumeUrl(entry.resume_url) })
      host.emit({ kind: 'session_deposited', nodeId: record.nodeId, shardId: entry.shard_id, generation: host.generation })
    }
    host.reshards.afterCheckin(record.nodeId, body.next_ready_shards, body.generation, !host.stale)
    return { rotated, previousSerial }
  }

  /**
   * A node shutting down on purpose (SPEC "Leaving on purpose"): it stopped every shard, so it leaves the
   * live set at once and everything it had to hand off is released with it, as at an expiry; the sessions
   * it deposits (for the shards it owned or had to hand off) wait for their new owners. A node that is not
   * live has nothing to leave: the answer is the plan without it, and nothing changes.
   */
  private leave(now: number, body: CheckinBody, cert: CertRef, record: NodeRecord | undefined): Registration {
    const none = { rotated: false, previousSerial: null }
    if (record === undefined) return none
    const host = this.host
    const deposit = body.sessions ?? []
    if (deposit.length > 0) {
      assertDepositAccepted(deposit, {
        nodeIndexId: host.nodes.find(body.node_id),
        reportedGeneration: body.generation,
        totalShards: host.totalShards,
        handoffs: host.handoffs,
        allowedHosts: host.allowedResumeHosts,
        revokedUpTo: host.holders.revokedUpTo(body.node_id),
        ownsNow: (shardId) => host.ownerOf(shardId) === body.node_id,
      })
    }
    for (const entry of deposit) {
      host.sessions.deposit(now, entry.shard_id, record.nodeId, { sessionId: entry.session_id, sequence: entry.sequence, resumeUrl: canonicalResumeUrl(entry.resume_url) })
      host.emit({ kind: 'session_deposited', nodeId: record.nodeId, shardId: entry.shard_id, generation: host.generation })
    }
    this.dropNode(record, false)
    host.emit({ kind: 'node_left', nodeId: record.nodeId, serial: cert.serial, sessions: deposit.length })
    this.leaves.push({ nodeId: record.nodeId, at: now })
    if (this.leaves.length > RECENT_LEAVES_KEPT) this.leaves.shift()
    return none
  }

  /** Expires nodes with now - lastSeen > lease and re-plans; O(1) when none is due (core/lease-holders.ts). */
  expire(now: number): string[] {
    const host = this.host
    if (host.holders.revoked.size > 0) this.releaseRevokedHolders(now)
    const expired = host.holders.takeExpired(now)
    for (const record of expired) {
      this.dropNode(record, false)
      host.emit({ kind: 'node_expired', nodeId: record.nodeId, lastSeen: record.lastSeen })
    }
    if (expired.length > 0) host.replan()
    return expired.map((record) => record.nodeId)
  }

  /**
   * Removes at once every live node whose certificate serial is revoked (expired leases gone and the plan
   * settled first); returns their IDs. Their shards move now; their handoffs wait for their lease.
   */
  removeRevoked(isRevoked: (serial: string) => boolean): string[] {
    const host = this.host
    const removed = [...host.holders.live.values()].filter((record) => isRevoked(record.certSerial))
    const holders = removed.map((record) => {
      // what a revoked node deposited is no longer vouched for: its shards' next owners Identify
      host.sessions.discardFrom(record.nodeId)
      const holder = host.holders.revoked.add(record)
      this.dropNode(record, true)
      host.emit({ kind: 'node_removed', nodeId: record.nodeId, serial: record.certSerial, reason: 'revoked' })
      return holder
    })
    host.settle()
    for (const holder of holders) holder.generation = host.generation // the plan that took its shards (the handoffs at or below it)
    if (holders.length > 0) host.markDurable()
    return removed.map((record) => record.nodeId)
  }

  /**
   * Sets or clears a node's drain flag (kept while the node is not live) and re-plans (the plan settled
   * first). A drain that would leave more shards without a node (the other live nodes lack the capacity)
   * is refused with 409 `insufficient_capacity` and changes nothing, unless `force`.
   */
  setDraining(nodeId: string, draining: boolean, force: boolean): DrainOutcome {
    const host = this.host
    if (!isValidName(nodeId)) throw new AppError('invalid_request', `node_id ${nameProblem(nodeId) ?? 'is invalid'}`)
    const live = host.holders.live.has(nodeId)
    if (draining !== host.draining.has(nodeId)) {
      if (draining) host.draining.add(nodeId)
      else host.draining.delete(nodeId)
      if (draining && !force && live) this.assertDrainLeavesNoneStranded(nodeId)
      host.tracker.drain(nodeId)
      host.markDurable()
      if (live) host.replan()
    }
    return { nodeId, draining, generation: host.generation, live, unassigned: host.plan.unassigned }
  }

  /** With `nodeId` flagged already: throws (and takes the flag back) if the plan would strand more shards. */
  private assertDrainLeavesNoneStranded(nodeId: string): void {
    const { plan, draining, totalShards } = this.host
    const stranded = totalShards - plan.compute().assigned - plan.unassigned
    if (stranded <= 0) return
    draining.delete(nodeId)
    throw new AppError(
      'insufficient_capacity',
      `draining ${nodeId} would leave ${stranded} more ${stranded === 1 ? 'shard' : 'shards'} without a node (${plan.unassigned + stranded} in all): ` +
        'the other live nodes lack the capacity; add capacity first, or drain with "force": true',
      { unassigned: plan.unassigned + stranded },
    )
  }

  /** Revoked nodes whose lease ran out have stopped everything: what waited for them is released. */
  private releaseRevokedHolders(now: number): void {
    const host = this.host
    const due = host.holders.revoked.takeDue(now, host.leaseMs)
    for (const holder of due) {
      const id = host.nodes.find(holder.nodeId)
      const live = host.holders.live.has(holder.nodeId)
      if (id !== undefined) host.handoffs.releaseAcknowledged(id, holder.generation)
      host.reshards.releaseRevoked(holder.nodeId, id ?? NO_NODE, holder.generation, live)
      if (id !== undefined && !live) host.nodes.release(holder.nodeId) // no table refers to it any more
    }
    if (due.length > 0) host.markDurable()
  }

  /**
   * Applies a check-in to a record. `record`: a persisted field of the record changed (capacity,
   * certificate) and it is written with the answer; `state`: the check-in released handoffs or
   * acknowledged a reshard, changes of their own (handoff runs, the meta) that the answer waits for.
   * A new reported generation is neither: checkin() marks it as a report (state-tracker.ts), also when
   * it released something: a release is justified by the report the leader read, never by a stored one
   * (the restore reads no reported generation), so the record need not go with it.
   */
  private updateRecord(record: NodeRecord, now: number, body: CheckinBody, cert: CertRef): { record: boolean; state: boolean } {
    const host = this.host
    const changed = renewRecord(record, now, body, cert)
    let state = false
    if (body.generation !== undefined) {
      record.reportedGeneration = body.generation
      const id = host.nodes.idOf(record.nodeId)
      const revokedUpTo = host.holders.revokedUpTo(record.nodeId)
      if (host.handoffs.releaseAcknowledged(id, body.generation, revokedUpTo) > 0) state = true
      if (host.reshards.acknowledge(record.nodeId, id, body.generation, revokedUpTo)) state = true
    }
    return { record: changed, state }
  }

  /**
   * Takes a node out of the live set. Expired: it stopped everything, so whatever it had to hand off is
   * released with it. Revoked: that waits for its lease (releaseRevokedHolders).
   */
  private dropNode(record: NodeRecord, revoked: boolean): void {
    const host = this.host
    host.holders.unlink(record)
    const id = host.nodes.idOf(record.nodeId)
    const revokedUpTo = revoked ? undefined : host.holders.revokedUpTo(record.nodeId)
    if (!revoked) host.handoffs.releaseAcknowledged(id, Infinity, revokedUpTo)
    host.reshards.drop(record.nodeId, id, revoked, revokedUpTo)
    host.plan.leave(record.nodeId)
    this.touchNode(record.nodeId)
    host.stale = true
  }

  /** A record changed: it is written with the next delta. */
  private touchNode(nodeId: string): void {
    this.host.tracker.node(nodeId)
    this.host.markDurable()
  }
}
