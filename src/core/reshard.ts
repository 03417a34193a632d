/**
 * The reshard barrier: after a restart with another total_shards, every shard number means other
 * guilds, so no Identify is granted until every node restored from the old state has applied the new
 * plan (reported its generation) or left (lease expired, revoked). Otherwise a node still running old
 * shard 5 of 64 and a new owner of shard 5 of 128 would serve overlapping guilds twice.
 */

/** Restored nodes that still run the pre-reshard plan. */
export class ReshardBarrier {
  private readonly waiting: Set<string>

  constructor(
    /** The first generation planned with the new total_shards. */
    readonly generation: number,
    waitingFor: Iterable<string>,
  ) {
    this.waiting = new Set(waitingFor)
  }

  /** True while some restored node has not applied the new plan. */
  get active(): boolean {
    return this.waiting.size > 0
  }

  /** The nodes still waited for, in byte order (for snapshots). */
  get waitingFor(): string[] {
    return [...this.waiting].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
  }

  /** Whether `nodeId` is still waited for. */
  has(nodeId: string): boolean {
    return this.waiting.has(nodeId)
  }

  /** A node reported running `generation`; true when that released it. */
  acknowledge(nodeId: string, generation: number): boolean {
    return generation >= this.generation && this.waiting.delete(nodeId)
  }

  /** A node left (expired, revoked); true when it was waited for. */
  release(nodeId: string): boolean {
    return this.waiting.delete(nodeId)
  }
}

/** Until the last waited-for node's lease would run out (it may report earlier): an Identify's retry-after. */
export function reshardWaitMs(
  barrier: ReshardBarrier | null,
  leaseFrom: (nodeId: string) => number | undefined,
  leaseMs: number,
  now: number,
): number {
  let until = now + 1
  for (const nodeId of barrier?.waitingFor ?? []) {
    const lastSeen = leaseFrom(nodeId)
    if (lastSeen !== undefined) until = Math.max(until, lastSeen + leaseMs + 1)
  }
  return until - now
}
