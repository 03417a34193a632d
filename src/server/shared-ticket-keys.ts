/**
 * TLS session-ticket keys shared by the HA replicas, so that a node's TLS session survives a take-over:
 * after a kill -9 of the leader every node reconnects to the new leader at once, and a resumed handshake
 * costs a fraction of a full one (with 10,000 nodes, full ones took most of a lease).
 *
 * The keys live in memory and, sealed (ticket-key-seal.ts), in etcd (ha/ticket-key-store.ts). The rules:
 * - a record that opens, belongs to the CRL in force here and is young enough always wins: every replica
 *   adopts it (at start, on every change the watch reports, and on a periodic check), so that the
 *   sessions the leader issued resume on whichever replica leads next;
 * - only the leader writes, fenced and over the copy it read, and only when the record is missing,
 *   unusable, of another CRL or too old: then it puts its own keys there;
 * - on a CRL change every replica draws fresh keys at once (a resumed handshake skips the CRL check of
 *   identity/tls-crl.ts, so no session from before may resume; the per-request revocation check stays in
 *   any case), then adopts the leader's record once it holds keys of the new CRL; the same at the
 *   maximum age (24 h, by a timer);
 * - a record that does not open (tampered, forged, sealed under other plan keys) is never used; it is
 *   logged (once per record) and the leader replaces it.
 * A replica that cannot reach etcd keeps the keys it has: sessions then simply stop resuming across
 * replicas, nothing else changes. The keys are never logged. SECURITY.md "Keys" says why this is sound.
 */
import { randomBytes } from 'node:crypto'
import type { Logger } from 'pino'
import { crlFingerprint, TICKET_KEY_BYTES } from './ticket-key-file.js'
import type { TicketSealKey } from './ticket-key-seal.js'
import { TICKET_KEY_MAX_AGE_MS, type InstallTicketKeys, type TicketKeyRotation } from './ticket-keys.js'

/** A record dated further in the future than this (a clock set back somewhere) is not trusted to be young. */
const FUTURE_TOLERANCE_MS = 60_000
/** How often the record is checked besides the watch (a missed event, a new leader that must publish). */
const CHECK_INTERVAL_MS = 5000
/** One etcd call of the check may take this long. */
const CALL_TIMEOUT_MS = 3000

/** The stored record (unparsed JSON) and the revision a write must find unchanged. */
export interface StoredTicketKeys {
  readonly raw: unknown
  readonly modRevision: string
}

/**
 * Where the sealed record lives: HA's etcd key (ha/ticket-key-store.ts, fenced by backends/ha-backend.ts),
 * or a test's. `write` puts the record only while this replica leads and the record is unchanged since
 * `expected` (null: absent): `not_leading` or `refused` otherwise.
 */
export interface TicketKeyStoreAccess {
  read(timeoutMs?: number): Promise<StoredTicketKeys | null>
  write(record: object, expected: string | null): Promise<'committed' | 'refused' | 'not_leading'>
  watch(onChange: () => void): { cancel(): Promise<void> }
}

/** Options of SharedTicketKeys.open. */
export interface SharedTicketKeysOptions {
  readonly store: TicketKeyStoreAccess
  readonly seal: TicketSealKey
  /** The CRL in force now (`ParsedCrl.pem`). */
  readonly crlPem: string
  readonly logger?: Logger | undefined
  /** Wall clock in ms (tests pass their own). */
  readonly now?: () => number
  /** Tests shorten them. */
  readonly maxAgeMs?: number
  readonly checkIntervalMs?: number
}

/** The keys in force on this replica and their agreement with the cluster's record. */
export class SharedTicketKeys {
  #keys: Buffer // a private field: never shown by util.inspect or JSON.stringify (so never logged)
  private createdAt: number
  private crlSha256: string
  /** When the keys in force reach the maximum age, on the monotonic clock. */
  private deadline: number
  private install: InstallTicketKeys | null = null
  private watch: { cancel(): Promise<void> } | null = null
  private ageTimer: NodeJS.Timeout | undefined
  private checkTimer: NodeJS.Timeout | undefined
  private checking: Promise<void> | null = null
  private checkAgain = false
  private closed = false
  private closing: Promise<void> | null = null
  /** The mod revision of the last record whose problem was logged (each bad record is logged once). */
  private loggedRevision: string | null = null
  private readonly now: () => number
  private readonly maxAgeMs: number

  private constructor(
    private readonly opts: SharedTicketKeysOptions,
    keys: Buffer,
    createdAt: number,
  ) {
    this.now = opts.now ?? Date.now
    this.maxAgeMs = opts.maxAgeMs ?? TICKET_KEY_MAX_AGE_MS
    this.#keys = keys
    this.createdAt = createdAt
    this.crlSha256 = crlFingerprint(opts.crlPem)
    this.deadline = this.deadlineFor(createdAt)
  }

  /** The cluster's keys when its record is good for `opts.crlPem`, else fresh ones (published once this replica leads). */
  static async open(opts: SharedTicketKeysOptions): Promise<SharedTicketKeys> {
    const now = opts.now ?? Date.now
    const keys = new SharedTicketKeys(opts, randomBytes(TICKET_KEY_BYTES), now())
    const stored = await opts.store.read(CALL_TIMEOUT_MS).catch((err: Error) => {
      opts.logger?.warn({ err: err.message }, 'TLS session-ticket keys: the cluster record could not be read; drawing keys of our own')
      return null
    })
    const usable = stored === null ? null : keys.usable(stored)
    if (usable !== null) keys.adopt(usable, 'TLS session-ticket keys taken from the cluster: sessions made with another replica resume here')
    else opts.logger?.info('TLS session-ticket keys drawn; they are shared through etcd once this replica leads')
    return keys
  }

  /** The keys in force (48 bytes), for building a secure context. */
  get current(): Buffer {
    return this.#keys
  }

  /**
   * Draws new keys and hands them to `install`; once it returned, they are the keys in force. Then the
   * cluster's record is checked: the leader publishes them, a follower adopts the leader's once it holds
   * keys of the same CRL. `crlPem` is the CRL they belong to (for a CRL change), else it stays.
   */
  rotate(reason: TicketKeyRotation, install: InstallTicketKeys, crlPem?: string): void {
    const keys = randomBytes(TICKET_KEY_BYTES)
    install(keys) // throws: nothing changed
    this.#keys = keys
    this.createdAt = this.now()
    this.deadline = this.deadlineFor(this.createdAt)
    if (crlPem !== undefined) this.crlSha256 = crlFingerprint(crlPem)
    this.opts.logger?.info({ reason }, 'TLS session-ticket keys rotated: sessions from before cannot resume')
    this.checkSoon()
  }

  /**
   * Follows the cluster from now on with `install` (the TLS server's): the watch, the periodic check
   * (which also lets a new leader publish) and the rotation by age. Unref'd timers.
   */
  startTimer(install: InstallTicketKeys): void {
    if (this.closed) return
    this.install = install
    this.watch ??= this.opts.store.watch(() => this.checkSoon())
    clearInterval(this.checkTimer)
    this.checkTimer = setInterval(() => this.checkSoon(), this.opts.checkIntervalMs ?? CHECK_INTERVAL_MS).unref()
    this.armAgeTimer()
    this.checkSoon()
  }

  /** Stops following and waits for a check in flight (again: the same wait). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.closed = true
      clearTimeout(this.ageTimer)
      clearInterval(this.checkTimer)
      await this.watch?.cancel().catch(() => undefined)
      await this.checking
    })()
    return this.closing
  }

  /** Runs a check now, or once more after the one in flight. */
  private checkSoon(): void {
    if (this.closed || this.install === null) return
    if (this.checking !== null) {
      this.checkAgain = true
      return
    }
    this.checking = (async () => {
      try {
        do {
          this.checkAgain = false
          await this.check()
        } while (this.checkAgain && !this.closed)
      } finally {
        this.checking = null
      }
    })()
  }

  /** Adopts a good record; a leader replaces a missing or unusable one with its own keys. */
  private async check(): Promise<void> {
    try {
      const stored = await this.opts.store.read(CALL_TIMEOUT_MS)
      const usable = stored === null ? null : this.usable(stored)
      if (usable !== null) {
        if (!usable.keys.equals(this.#keys)) this.adopt(usable, 'TLS session-ticket keys taken from the cluster record')
        return
      }
      if (this.keysTooOld()) return // the age timer draws new ones first (then this runs again)
      const record = this.opts.seal.seal(this.#keys, { createdAt: this.createdAt, crlSha256: this.crlSha256 })
      // Only the leader's write lands; a follower waits for the leader's record (the watch, the re-read).
      const status = await this.opts.store.write(record, stored?.modRevision ?? null)
      // Refused: another leader's write (its watch event brings it here again) or a lost term (the
      // leadership notices); trying again at once would spin on a stale fence until then.
      if (status === 'committed') this.opts.logger?.info('TLS session-ticket keys published to the cluster (sealed): the other replicas take them')
    } catch (err) {
      this.opts.logger?.warn({ err: (err as Error).message }, 'TLS session-ticket keys: the cluster record could not be checked; keeping the keys in force')
    }
  }

  /** The record's keys and binding when they are good here (open, this CRL, young), else null (its problem logged once). */
  private usable(stored: StoredTicketKeys): { readonly keys: Buffer; readonly createdAt: number } | null {
    const opened = this.opts.seal.open(stored.raw)
    let problem: string | null = null
    if ('problem' in opened) problem = `${opened.problem}: ${opened.detail}`
    else if (opened.binding.crlSha256 !== this.crlSha256) problem = null // another CRL (older, or one this replica has not taken yet): not ours to judge
    else if (opened.binding.createdAt > this.now() + FUTURE_TOLERANCE_MS) problem = 'dated in the future (was a clock set back?)'
    else if (this.now() - opened.binding.createdAt >= this.maxAgeMs) problem = null // older than the maximum age: replaced in due course
    else return { keys: opened.keys, createdAt: opened.binding.createdAt }
    if (problem !== null && this.loggedRevision !== stored.modRevision) {
      this.loggedRevision = stored.modRevision
      this.opts.logger?.warn({ key_revision: stored.modRevision, problem }, 'TLS session-ticket key record in etcd not used')
    }
    return null
  }

  private adopt(usable: { readonly keys: Buffer; readonly createdAt: number }, message: string): void {
    this.install?.(usable.keys) // throws: nothing changed
    this.#keys = usable.keys
    this.createdAt = usable.createdAt
    this.deadline = this.deadlineFor(this.createdAt)
    this.armAgeTimer()
    this.opts.logger?.info({ createdAt: new Date(this.createdAt).toISOString() }, message)
  }

  private keysTooOld(): boolean {
    return performance.now() >= this.deadline
  }

  private deadlineFor(createdAt: number): number {
    return performance.now() + Math.max(0, this.maxAgeMs - Math.max(0, this.now() - createdAt))
  }

  /** Rotates the keys in force when they reach the maximum age. */
  private armAgeTimer(): void {
    if (this.closed || this.install === null) return
    clearTimeout(this.ageTimer)
    const install = this.install
    this.ageTimer = setTimeout(() => {
      if (this.keysTooOld()) {
        try {
          this.rotate('max_age', install)
        } catch (err) {
          this.opts.logger?.error({ err: (err as Error).message }, 'TLS session-ticket keys could not be rotated; trying again')
        }
      }
      this.armAgeTimer()
    }, Math.min(this.maxAgeMs, Math.max(1000, this.deadline - performance.now()))).unref()
  }
}
