/**
 * Connection caps before authentication (SPEC "Rate limits"): at most `perAddress` open connections per
 * source address and `total` in all, enforced at accept time — before any TLS work — so idle or
 * half-open sockets from one host cannot use up the process's descriptors and lock every node out.
 * IPv6 sources are counted per /64, the smallest block a single site is normally given.
 */
import type { Server } from 'node:net'
import type { Socket } from 'node:net'
import { addressKey } from '../net/address-key.js'

export interface ConnectionLimits {
  readonly perAddress: number
  readonly total: number
}

/** Why a connection was dropped at accept time. */
export type ConnectionRefusal = 'max_connections_per_address' | 'max_connections'

/** Counts open connections per source and drops the excess at accept time. */
export class ConnectionCaps {
  private readonly open = new Map<string, number>()
  private readonly dropped = new WeakSet<Socket>()
  private readonly refusedCounts: Record<ConnectionRefusal, number> = { max_connections_per_address: 0, max_connections: 0 }

  constructor(
    private readonly limits: ConnectionLimits,
    private readonly onRefused: (address: string, reason: ConnectionRefusal) => void,
  ) {}

  /** Installs the caps on a server; must run before the server's own 'connection' listeners act. */
  attach(server: Server): void {
    // Node drops connections over maxConnections itself, before 'connection' is emitted.
    server.maxConnections = this.limits.total
    server.on('drop', (data?: { remoteAddress?: string }) => this.refuse(addressKey(data?.remoteAddress), 'max_connections'))
    server.prependListener('connection', (raw: Socket) => {
      const key = addressKey(raw.remoteAddress)
      const count = this.open.get(key) ?? 0
      if (count >= this.limits.perAddress) {
        this.dropped.add(raw)
        raw.destroy()
        this.refuse(key, 'max_connections_per_address')
        return
      }
      this.open.set(key, count + 1)
      raw.once('close', () => {
        const left = (this.open.get(key) ?? 1) - 1
        if (left <= 0) this.open.delete(key)
        else this.open.set(key, left)
      })
    })
  }

  /** True for a raw socket these caps dropped (its TLS error is ours, not the peer's). */
  wasDropped(raw: Socket | undefined): boolean {
    return raw !== undefined && this.dropped.has(raw)
  }

  /** Connections refused so far, by reason (for metrics). */
  get refused(): Readonly<Record<ConnectionRefusal, number>> {
    return this.refusedCounts
  }

  /** Source keys with open connections (for tests). */
  get trackedSources(): number {
    return this.open.size
  }

  private refuse(key: string, reason: ConnectionRefusal): void {
    this.refusedCounts[reason] += 1
    this.onRefused(key, reason)
  }
}
