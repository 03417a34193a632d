/**
 * Who may be running shards, and until when (SPEC "Leases"): the live nodes, in lastSeen order for an
 * O(1) expiry check, and the revoked nodes inside their lease (core/revoked-holders.ts). Both sets are
 * the controller's; what leaves them is the controller's to release.
 */
import type { NodeIndex } from './node-index.js'
import type { NodeRecord } from './node-record.js'
import { RevokedHolders } from './revoked-holders.js'

/** The live records and the revoked holders of a controller. */
export class LeaseHolders {
  /** Live nodes, re-inserted on every check-in: iteration order is lastSeen order, oldest first. */
  readonly live = new Map<string, NodeRecord>()
  readonly revoked = new RevokedHolders()
  /**
   * The first record of `live` when takeExpired last read it, while it still is (null: read again). Only a
   * deletion can change a non-empty Map's head (insertions go to the end): unlink clears this.
   */
  private expiryHead: NodeRecord | null = null

  constructor(private readonly leaseMs: number) {}

  /** Puts a record at the back of the lastSeen order (its lease was just renewed). */
  renew(record: NodeRecord): void {
    this.unlink(record)
    this.live.set(record.nodeId, record)
  }

  /** Takes a record out of `live`, forgetting it as expiry's head if it was (the head is then another). */
  unlink(record: NodeRecord): void {
    if (record === this.expiryHead) this.expiryHead = null
    this.live.delete(record.nodeId)
  }

  /**
   * The live records whose lease ran out at `now` (now - lastSeen > lease), oldest first, still in `live`
   * (the caller drops them). O(1) while the head found last is still the head and within its lease: reading
   * the head of `live` is not O(1), because every check-in deletes and re-inserts its node and a Map's
   * iterator steps over the deleted entries at its front until the table is rebuilt (measured at 10,000
   * nodes: 15 ms of every second of a fleet's steady state went to finding the head).
   */
  takeExpired(now: number): NodeRecord[] {
    const head = this.expiryHead
    if (head !== null && now - head.lastSeen <= this.leaseMs) return []
    const expired: NodeRecord[] = []
    let first: NodeRecord | null = null
    for (const record of this.live.values()) {
      if (now - record.lastSeen <= this.leaseMs) {
        first = record
        break
      }
      expired.push(record)
    }
    this.expiryHead = first // the head once the expired ones before it are dropped
    return expired
  }

  /** When the lease of a node that may run shards counts from: the later of its live record's and its revoked holder's. */
  leaseFrom(nodeId: string): number | undefined {
    const live = this.live.get(nodeId)?.lastSeen
    const revoked = this.revoked.get(nodeId)?.lastSeen
    if (revoked === undefined) return live
    return live === undefined ? revoked : Math.max(live, revoked)
  }

  /** Whether a node may be running shards: live, or revoked inside its lease. */
  mayRunShards(nodeId: string): boolean {
    return this.live.has(nodeId) || this.revoked.has(nodeId)
  }

  /**
   * The generation at or below which a node's handoffs wait for a revoked holder of its name (no check-in
   * of the name speaks for those), or undefined.
   */
  revokedUpTo(nodeId: string): number | undefined {
    return this.revoked.get(nodeId)?.generation
  }

  /** The node IDs of the revoked holders (they count as live for the handoffs a re-plan records). */
  revokedIds(nodes: NodeIndex): number[] {
    const ids: number[] = []
    for (const nodeId of this.revoked.names()) ids.push(nodes.idOf(nodeId))
    return ids
  }
}
