/**
 * TLS session-ticket keys that survive a restart. After a restart every node reconnects at once; with
 * the keys kept in `state_dir` (ticket-key-file.ts) they resume their TLS sessions, which costs a
 * fraction of a full handshake. New keys are drawn (and saved) whenever the CRL in force changes — a
 * resumed session skips the handshake's CRL check (identity/tls-crl.ts) — and once the keys are
 * TICKET_KEY_MAX_AGE_MS old, by a timer and at start. The keys are never logged. Why the file matters:
 * SECURITY.md "Keys".
 */
import { randomBytes } from 'node:crypto'
import type { Logger } from 'pino'
import { TLS_SESSION_LIFETIME_SECONDS } from '../identity/tls-crl.js'
import { crlFingerprint, readTicketKeyFile, removeTicketKeyTemps, TICKET_KEY_BYTES, writeTicketKeyFile, type TicketKeyRecord } from './ticket-key-file.js'

/** Keys are drawn afresh at least this often; a session cannot outlive its key, so it matches the session lifetime. */
export const TICKET_KEY_MAX_AGE_MS = TLS_SESSION_LIFETIME_SECONDS * 1000

/** A saved key from further in the future than this (a clock set back) is not trusted to be young. */
const FUTURE_TOLERANCE_MS = 60_000

/** After a rotation whose install threw, the timer tries again this much later (at most). */
const RETRY_MS = 60_000

/** Why keys were replaced. */
export type TicketKeyRotation = 'crl_changed' | 'max_age'

/** Options of TicketKeys.open. */
export interface TicketKeysOptions {
  /** The CRL in force now (`ParsedCrl.pem`): saved keys drawn under another CRL are not used. */
  readonly crlPem: string
  readonly logger?: Logger | undefined
  /** Wall clock in ms (tests pass their own). */
  readonly now?: () => number
  /** Tests shorten it; production uses TICKET_KEY_MAX_AGE_MS. */
  readonly maxAgeMs?: number
}

/** Puts keys in force on the TLS server; throws when it cannot (then nothing changed). */
export type InstallTicketKeys = (keys: Buffer) => void

/** The keys in force, their file, and the rotations. One instance per state directory. */
export class TicketKeys {
  #keys: Buffer // a private field: never shown by util.inspect or JSON.stringify (so never logged)
  private createdAt: number
  private crlSha256: string
  /** When the keys in force reach the maximum age, on the monotonic clock (a wall-clock jump moves nothing). */
  private deadline: number
  private timer: NodeJS.Timeout | undefined
  private closed = false
  private nextWrite: TicketKeyRecord | null = null
  private writing: Promise<void> | null = null

  private constructor(
    /** null: the keys live only in memory (HA, where state_dir is never written). */
    private readonly dir: string | null,
    record: TicketKeyRecord,
    private readonly now: () => number,
    private readonly maxAgeMs: number,
    private readonly logger: Logger | undefined,
  ) {
    this.#keys = record.keys
    this.createdAt = record.createdAt
    this.crlSha256 = record.crlSha256
    this.deadline = performance.now() + Math.max(0, maxAgeMs - Math.max(0, now() - record.createdAt))
  }

  /** The saved keys when they are still good for `opts.crlPem` and young enough, else new ones (saved before this resolves). */
  static async open(dir: string | null, opts: TicketKeysOptions): Promise<TicketKeys> {
    const now = opts.now ?? Date.now
    const maxAgeMs = opts.maxAgeMs ?? TICKET_KEY_MAX_AGE_MS
    const crlSha256 = crlFingerprint(opts.crlPem)
    if (dir === null) {
      opts.logger?.info('TLS session-ticket keys drawn for this process only (HA: not saved)')
      return new TicketKeys(null, { keys: randomBytes(TICKET_KEY_BYTES), createdAt: now(), crlSha256 }, now, maxAgeMs, opts.logger)
    }
    await removeTicketKeyTemps(dir)
    const found = await readTicketKeyFile(dir)
    const saved = 'record' in found ? found.record : null
    const stale = saved === null ? null : staleness(saved, crlSha256, now(), maxAgeMs)
    if (saved !== null && stale === null) {
      opts.logger?.info({ createdAt: new Date(saved.createdAt).toISOString() }, 'TLS session-ticket keys restored: sessions from before the restart can resume')
      return new TicketKeys(dir, saved, now, maxAgeMs, opts.logger)
    }
    if ('unusable' in found) opts.logger?.warn({ problem: found.unusable }, 'TLS session-ticket key file not used; drawing new keys')
    else if (stale !== null) opts.logger?.info({ reason: stale }, 'saved TLS session-ticket keys are stale; drawing new keys')
    else opts.logger?.info('no saved TLS session-ticket keys; drawing new keys')
    const keys = new TicketKeys(dir, { keys: randomBytes(TICKET_KEY_BYTES), createdAt: now(), crlSha256 }, now, maxAgeMs, opts.logger)
    keys.save()
    await keys.writing
    return keys
  }

  /** The keys in force (48 bytes), for building a secure context. */
  get current(): Buffer {
    return this.#keys
  }

  /**
   * Draws new keys and hands them to `install`; once it returned, they are the keys in force and are
   * saved in the background. `crlPem` is the CRL they belong to (for a CRL change), else it stays.
   */
  rotate(reason: TicketKeyRotation, install: InstallTicketKeys, crlPem?: string): void {
    const keys = randomBytes(TICKET_KEY_BYTES)
    install(keys) // throws: nothing changed
    this.#keys = keys
    this.createdAt = this.now()
    this.deadline = performance.now() + this.maxAgeMs
    if (crlPem !== undefined) this.crlSha256 = crlFingerprint(crlPem)
    this.logger?.info({ reason }, 'TLS session-ticket keys rotated: sessions from before cannot resume')
    this.save()
  }

  /** Rotates the keys with `install` whenever they reach the maximum age (an unref'd timer). */
  startTimer(install: InstallTicketKeys): void {
    if (this.closed) return
    clearTimeout(this.timer)
    const due = Math.min(this.maxAgeMs, Math.max(0, this.deadline - performance.now()))
    this.timer = setTimeout(() => {
      let delay: number | undefined
      if (performance.now() >= this.deadline) {
        try {
          this.rotate('max_age', install)
        } catch (err) {
          this.logger?.error({ err: (err as Error).message }, 'TLS session-ticket keys could not be rotated; trying again')
          delay = Math.min(RETRY_MS, this.maxAgeMs)
        }
      }
      if (delay === undefined) this.startTimer(install)
      else this.timer = setTimeout(() => this.startTimer(install), delay).unref()
    }, due).unref()
  }

  /** Stops the timer and waits for the last save. */
  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.timer)
    await this.writing
  }

  /** Saves the keys in force; writes run one at a time and the latest keys win. */
  private save(): void {
    if (this.dir === null) return
    this.nextWrite = { keys: this.#keys, createdAt: this.createdAt, crlSha256: this.crlSha256 }
    this.writing ??= this.drain(this.dir)
  }

  private async drain(dir: string): Promise<void> {
    try {
      while (this.nextWrite !== null) {
        const record = this.nextWrite
        this.nextWrite = null
        // A failed save is safe: the file keeps keys bound to an older CRL or age, which the next start discards.
        await writeTicketKeyFile(dir, record).catch((err: NodeJS.ErrnoException) =>
          this.logger?.error({ code: err.code ?? null }, 'TLS session-ticket keys could not be saved; sessions will not resume after a restart'),
        )
      }
    } finally {
      this.writing = null
    }
  }
}

/** Why saved keys cannot be used any more, or null when they can. */
function staleness(saved: TicketKeyRecord, crlSha256: string, now: number, maxAgeMs: number): string | null {
  if (saved.crlSha256 !== crlSha256) return 'the CRL changed since they were drawn'
  if (saved.createdAt > now + FUTURE_TOLERANCE_MS) return 'they are dated in the future (was the clock set back?)'
  if (now - saved.createdAt >= maxAgeMs) return `they are older than the maximum age (${maxAgeMs / 1000} s)`
  return null
}
