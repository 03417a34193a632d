/**
 * Audit events that any remote peer can trigger at will — a refused TLS handshake, a request without a
 * usable identity — are limited per event kind and peer, so a flood cannot fill the disk. Whatever was
 * held back is written later as one summary line under the same event name, with the count.
 */
import type { AuditSink } from '../service/audit-sink.js'
import { OVERFLOW_KEY, WindowRateLimiter } from './rate-limiter.js'

/** The event kinds a peer can cause without holding a valid identity. */
export type PeerEvent = 'tls_rejected' | 'unauthenticated'

const PEER_EVENTS: readonly PeerEvent[] = ['tls_rejected', 'unauthenticated']

export interface PeerAuditLimits {
  readonly maxPerWindow: number
  readonly windowMs: number
  /** Peers tracked at once per event kind; beyond that they share one window ("other peers"). */
  readonly maxPeers: number
}

export class PeerAuditLimiter {
  private readonly limiters: ReadonlyMap<PeerEvent, WindowRateLimiter>

  constructor(
    private readonly audit: AuditSink,
    private readonly now: () => number,
    limits: PeerAuditLimits,
  ) {
    const options = { maxPerWindow: limits.maxPerWindow, windowMs: limits.windowMs, maxKeys: limits.maxPeers }
    this.limiters = new Map(PEER_EVENTS.map((event) => [event, new WindowRateLimiter(options)]))
  }

  /** Records the event unless this peer used up its window for this kind; returns whether it was written. */
  record(event: PeerEvent, peer: string, fields: Record<string, unknown>): boolean {
    if (!this.limiters.get(event)!.allow(this.now(), peer)) return false
    this.audit.record(event, { peer, ...fields })
    return true
  }

  /**
   * Writes one summary line per event kind and peer whose ended window held events back; with
   * `endAll` (at stop) every open window counts as ended, so nothing held back goes unreported.
   */
  flushSuppressed(endAll = false): void {
    const now = endAll ? Number.POSITIVE_INFINITY : this.now()
    for (const [event, limiter] of this.limiters) {
      for (const s of limiter.takeSuppressed(now)) {
        this.audit.record(event, {
          peer: s.key === OVERFLOW_KEY ? 'other peers' : s.key,
          suppressed: s.count,
          since: new Date(s.since).toISOString(),
          until: new Date(Math.min(s.until, this.now())).toISOString(), // an early end (stop) is now
        })
      }
    }
  }
}
