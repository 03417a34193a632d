/**
 * Sessions deposited by nodes that released a shard by plan (SPEC "Session handoff"), held for the
 * shard's next owner. Memory only, by design: never part of the durable state, the audit log, logs or
 * metrics (only their count), so a restart or an HA take-over forgets them and the new owners Identify.
 * Pure: the clock is a parameter.
 */

/** SPEC "Session handoff": how long a deposited session is held unless `session_handoff.ttl_seconds` says otherwise. */
export const DEFAULT_SESSION_TTL_SECONDS = 60

/** What the next owner needs to RESUME a Discord session. */
export interface HeldSession {
  readonly sessionId: string
  readonly sequence: number
  readonly resumeUrl: string
}

interface Entry {
  readonly session: HeldSession
  /** The node that deposited it (its sessions go when it is revoked). */
  readonly depositor: string
  readonly expiresAt: number
}

/** At most one session per shard, each for at most `ttlMs`, handed out once. */
export class SessionVault {
  /** Insertion order is deposit order, and the TTL is fixed: the head expires first. */
  private readonly held = new Map<number, Entry>()

  constructor(private readonly ttlMs: number) {}

  /** Forgets every held session (a reshard's switch: their shard numbers belong to the old shard count). */
  clear(): void {
    this.held.clear()
  }

  /** Holds `session` for `shardId` until `now + ttl` (replacing one held for that shard). */
  deposit(now: number, shardId: number, depositor: string, session: HeldSession): void {
    this.held.delete(shardId)
    const { sessionId, sequence, resumeUrl } = session
    this.held.set(shardId, { session: { sessionId, sequence, resumeUrl }, depositor, expiresAt: now + this.ttlMs })
  }

  /** The session held for `shardId` if it has not expired, removed as it is handed out; else null. */
  take(now: number, shardId: number): HeldSession | null {
    const entry = this.held.get(shardId)
    if (entry === undefined) return null
    this.held.delete(shardId)
    return now < entry.expiresAt ? entry.session : null
  }

  /** Forgets the session held for `shardId`; true when there was one. */
  discard(shardId: number): boolean {
    return this.held.delete(shardId)
  }

  /** Forgets every session `depositor` deposited (its certificate was revoked); returns how many. */
  discardFrom(depositor: string): number {
    let count = 0
    for (const [shardId, entry] of this.held) {
      if (entry.depositor !== depositor) continue
      this.held.delete(shardId)
      count += 1
    }
    return count
  }

  /** How many sessions are held at `now` (expired ones are dropped first). */
  size(now: number): number {
    for (const [shardId, entry] of this.held) {
      if (now < entry.expiresAt) break
      this.held.delete(shardId)
    }
    return this.held.size
  }
}
