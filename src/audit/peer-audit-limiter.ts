/**
 * Audit events that a remote party can trigger at will are limited per event kind and per source, so a
 * flood cannot fill the disk: events anyone can cause (a refused TLS handshake or connection, a request
 * without a usable identity) per peer address; events a valid certificate can cause over and over (speaking
 * for another node, claiming a shard it does not own, a conflicting certificate) per certificate serial.
 * Whatever was held back is written later as one summary line under the same event name, with the count.
 * Peer addresses are counted as the connection caps count them: IPv6 per /64, so a host rotating through
 * the addresses of its /64 shares one window (its lines still name the full address; summaries the /64).
 */
import type { AuditSink } from './audit-sink.js'
import { addressKey } from '../net/address-key.js'
import { OVERFLOW_KEY, WindowRateLimiter } from './rate-limiter.js'

/** Events keyed by the peer address (no identity needed to cause them). */
export type PeerEvent = 'tls_rejected' | 'unauthenticated' | 'connection_refused' | 'enroll_refused'
/** Events keyed by the certificate serial of an authenticated principal. */
export type PrincipalEvent = 'identity_mismatch' | 'identity_conflict' | 'not_owner' | 'session_deposit_refused'
export type LimitedEvent = PeerEvent | PrincipalEvent

const KEY_FIELD: Readonly<Record<LimitedEvent, 'peer' | 'serial'>> = {
  tls_rejected: 'peer',
  unauthenticated: 'peer',
  connection_refused: 'peer',
  enroll_refused: 'peer',
  identity_mismatch: 'serial',
  identity_conflict: 'serial',
  not_owner: 'serial',
  session_deposit_refused: 'serial',
}

export interface PeerAuditLimits {
  readonly maxPerWindow: number
  readonly windowMs: number
  /** Sources tracked at once per event kind; beyond that they share one window ("others"). */
  readonly maxPeers: number
  /** Per-event overrides of maxPerWindow (e.g. refused connections: one line a minute per address). */
  readonly perEvent?: Partial<Record<LimitedEvent, number>>
}

/** Called for every line actually written (to mirror it on the operational log with the same limits). */
export type WrittenLine = (event: LimitedEvent, fields: Record<string, unknown>) => void

export class PeerAuditLimiter {
  private readonly limiters: ReadonlyMap<LimitedEvent, WindowRateLimiter>

  constructor(
    private readonly audit: AuditSink,
    private readonly now: () => number,
    limits: PeerAuditLimits,
    private readonly onWritten?: WrittenLine,
  ) {
    const events = Object.keys(KEY_FIELD) as LimitedEvent[]
    this.limiters = new Map(
      events.map((event) => [
        event,
        new WindowRateLimiter({ maxPerWindow: limits.perEvent?.[event] ?? limits.maxPerWindow, windowMs: limits.windowMs, maxKeys: limits.maxPeers }),
      ]),
    )
  }

  /** Records the event unless this source used up its window for this kind; returns whether it was written. */
  record(event: LimitedEvent, source: string, fields: Record<string, unknown>): boolean {
    const key = KEY_FIELD[event] === 'peer' ? addressKey(source) : source
    if (!this.limiters.get(event)!.allow(this.now(), key)) return false
    this.write(event, { [KEY_FIELD[event]]: source, ...fields })
    return true
  }

  /**
   * Writes one summary line per event kind and source whose ended window held events back; with
   * `endAll` (at stop) every open window counts as ended, so nothing held back goes unreported.
   */
  flushSuppressed(endAll = false): void {
    const now = endAll ? Number.POSITIVE_INFINITY : this.now()
    for (const [event, limiter] of this.limiters) {
      for (const s of limiter.takeSuppressed(now)) {
        const field = KEY_FIELD[event]
        this.write(event, {
          [field]: s.key === OVERFLOW_KEY ? (field === 'peer' ? 'other peers' : 'other principals') : s.key,
          suppressed: s.count,
          since: new Date(s.since).toISOString(),
          until: new Date(Math.min(s.until, this.now())).toISOString(), // an early end (stop) is now
        })
      }
    }
  }

  private write(event: LimitedEvent, fields: Record<string, unknown>): void {
    this.audit.record(event, fields)
    this.onWritten?.(event, fields)
  }
}
