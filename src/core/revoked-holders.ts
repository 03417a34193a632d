/**
 * Revoked nodes that may still be running shards (SPEC "Leases"): a revoked node is out of the live set and
 * the plan at once, but it may be cut off from the controller and keep its shards until its own fail-safe
 * stops them, one lease after the last check-in it sent. Until then, every shard it may run stays a pending
 * handoff, and whatever waited for it keeps waiting; no check-in speaks for it any more (the name may come
 * back with another certificate, but that is another process: its reports release only its own handoffs).
 */
import type { PersistedRevokedHolder } from './durable-state.js'
import type { NodeRecord } from './node-record.js'

/** One revoked node whose lease has not run out yet. */
export interface RevokedHolder {
  readonly nodeId: string
  readonly serial: string
  /** Its lease counts from here (its last check-in; after a restart, the restart). */
  readonly lastSeen: number
  /** The generation of the plan that took its shards away: its pending handoffs are those at or below it. */
  generation: number
}

/** The revoked nodes still inside their lease, by node ID. */
export class RevokedHolders {
  private readonly held = new Map<string, RevokedHolder>()
  /** The earliest lastSeen of `held` (Infinity when empty), so that the check on every check-in is O(1). */
  private earliest = Infinity

  get size(): number {
    return this.held.size
  }

  /** The revoked holder of a name, if its lease still runs. */
  get(nodeId: string): RevokedHolder | undefined {
    return this.held.get(nodeId)
  }

  has(nodeId: string): boolean {
    return this.held.has(nodeId)
  }

  /** The names held, in no particular order. */
  names(): IterableIterator<string> {
    return this.held.keys()
  }

  /**
   * A live record was revoked; `generation` is filled in once the plan without it is made. A name revoked
   * again within the lease keeps the later lease.
   */
  add(record: NodeRecord): RevokedHolder {
    const before = this.held.get(record.nodeId)
    const holder: RevokedHolder = { nodeId: record.nodeId, serial: record.certSerial, lastSeen: Math.max(record.lastSeen, before?.lastSeen ?? -Infinity), generation: 0 }
    this.held.set(record.nodeId, holder)
    this.earliest = Math.min(this.earliest, holder.lastSeen)
    return holder
  }

  /** Holders restored after a restart at `now`: their leases count from the restart, as live nodes' do. */
  restore(saved: readonly PersistedRevokedHolder[], now: number): void {
    for (const [nodeId, serial, generation] of saved) this.held.set(nodeId, { nodeId, serial, lastSeen: now, generation })
    if (saved.length > 0) this.earliest = Math.min(this.earliest, now)
  }

  /** Takes out and returns the holders whose lease ran out at `now` (now - lastSeen > lease). */
  takeDue(now: number, leaseMs: number): RevokedHolder[] {
    if (now - this.earliest <= leaseMs) return []
    const due: RevokedHolder[] = []
    let earliest = Infinity
    for (const holder of this.held.values()) {
      if (now - holder.lastSeen > leaseMs) due.push(holder)
      else earliest = Math.min(earliest, holder.lastSeen)
    }
    for (const holder of due) this.held.delete(holder.nodeId)
    this.earliest = earliest
    return due
  }

  /** As the state keeps them, in byte order of node IDs. */
  persisted(): PersistedRevokedHolder[] {
    return [...this.held.values()]
      .sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0))
      .map((holder) => [holder.nodeId, holder.serial, holder.generation] as const)
  }
}
