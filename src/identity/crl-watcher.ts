/**
 * Watches the CRL file and hands each new, verified CRL to `onLoaded` within about a second of the change.
 * `fs.watch` on the directory catches a write in place and a replace by rename at once; a periodic stat
 * catches what watching misses (network filesystems, a watch that died). The old CRL stays in force on
 * any refusal. A newer CRL whose thisUpdate is still in the future waits as pending (the old one stays
 * in force) and is installed by the periodic check once it is valid, unless the file changed meanwhile:
 * the file is the source of truth, so whatever it holds next replaces the pending CRL.
 */
import { createHash, type X509Certificate } from 'node:crypto'
import { watch, type FSWatcher, type Stats } from 'node:fs'
import { readFile, stat } from 'node:fs/promises'
import { basename, dirname } from 'node:path'
import { decideCrl, decideParsedCrl, expiringIn, type CrlDecision, type CrlRefusalReason } from './crl-decide.js'
import type { ParsedCrl } from './crl.js'

export type { CrlRefusalReason } from './crl-decide.js'

/** What a refusal carries besides its reason, for the log and the audit line. */
export interface CrlRefusalDetails {
  readonly path: string
  readonly message: string
  /** The CRL number of the refused file, when it parsed. */
  readonly crlNumber?: bigint | null
  /** The CRL number still in force. */
  readonly inForceCrlNumber: bigint | null
}

/** Options of `CrlWatcher`; the callbacks are called from timers, never synchronously from `start`. */
export interface CrlWatcherOptions {
  readonly path: string
  readonly ca: X509Certificate
  /** Period of the stat check; default 1000 ms. */
  readonly intervalMs?: number
  /** Quiet time after a burst of watch events before reading; default 50 ms. */
  readonly debounceMs?: number
  /** Periodic checks the file may be missing (a non-atomic replace) before it is reported; default 3. */
  readonly missingChecks?: number
  /** Set false to rely on the periodic check alone. Default true. */
  readonly watch?: boolean
  readonly now?: () => number
  /**
   * The file's content the caller already judged at the start (when the CRL in force came from elsewhere,
   * e.g. a newer pushed copy): not judged again until the file changes, so an unchanged older file is
   * reported once by the start, not refused anew by every start.
   */
  readonly judgedAtStart?: string
  /** A new CRL passed every check; if this throws, the CRL is refused as 'install_failed'. */
  onLoaded(crl: ParsedCrl): void
  onRefused(reason: CrlRefusalReason, details: CrlRefusalDetails): void
  /** A newer CRL is not valid yet (thisUpdate in the future): it waits, the CRL in force stays. */
  onPending?(crl: ParsedCrl): void
  /** The CRL in force has nextUpdate under 24 h away or past; at most once an hour per CRL. */
  onExpiring?(crl: ParsedCrl, msLeft: number): void
}

const HOUR_MS = 3_600_000
// mtime granularity can hide a second write in the same tick (1-2 s on some filesystems), so a file
// modified this recently is re-read even when its stat looks unchanged.
const RACY_WINDOW_MS = 3_000

/** Keeps the CRL in force up to date with the file at `path`. */
export class CrlWatcher {
  private current: ParsedCrl
  private pending: ParsedCrl | null = null
  private fsWatcher: FSWatcher | undefined
  private interval: NodeJS.Timeout | undefined
  private debounce: NodeJS.Timeout | undefined
  private lastFingerprint: string | null = null
  private lastHash: string | null = null
  private missingPolls = 0
  private lastReadError: string | null = null
  private warnedDer: Buffer | null = null
  private warnedAt = 0
  private inFlight: Promise<void> | null = null
  private again = false
  private againFromPoll = false
  private running = false
  private readonly now: () => number

  /** `initial` is in force from here on (already parsed and verified by the caller). */
  constructor(private readonly opts: CrlWatcherOptions, initial: ParsedCrl) {
    this.now = opts.now ?? Date.now
    this.current = initial
    if (opts.judgedAtStart !== undefined) this.lastHash = sha256(Buffer.from(opts.judgedAtStart, 'utf8'))
  }

  /** The CRL in force (the initial one until a newer one loads): the one copy the controller reads. */
  get inForce(): ParsedCrl {
    return this.current
  }

  /** The newer CRL waiting for its thisUpdate, if any. */
  get pendingCrl(): ParsedCrl | null {
    return this.pending
  }

  /**
   * Puts `crl`, decided elsewhere by the same rules (an operator's push, the cluster's copy), in force and
   * runs `act` on it, as a file change runs onLoaded: in force first, put back (and rethrown) if `act`
   * throws. A pending CRL from the file is decided afresh against it when due, as always.
   */
  adopt(crl: ParsedCrl, act: () => void): void {
    const previous = this.current
    this.current = crl
    try {
      act()
    } catch (err) {
      this.current = previous
      throw err
    }
  }

  /** Starts watching the file. */
  start(): void {
    if (this.running) throw new Error('CrlWatcher already started')
    this.running = true
    this.startFsWatch()
    this.interval = setInterval(() => this.tick(), this.opts.intervalMs ?? 1000)
    this.interval.unref()
    this.schedule()
  }

  /** Stops every timer and the directory watch; no callback runs after this returns. */
  stop(): void {
    this.running = false
    clearInterval(this.interval)
    clearTimeout(this.debounce)
    this.fsWatcher?.close()
    this.fsWatcher = undefined
  }

  /** Runs one check now (also what the timers call); resolves when it and any re-run it caused are done. */
  check(fromPoll = false): Promise<void> {
    if (this.inFlight !== null) {
      // Something changed while we were reading: look again once the current check ends.
      this.again = true
      this.againFromPoll ||= fromPoll
      return this.inFlight
    }
    this.inFlight = this.runChecks(fromPoll).finally(() => {
      this.inFlight = null
    })
    return this.inFlight
  }

  private async runChecks(fromPoll: boolean): Promise<void> {
    let poll = fromPoll
    do {
      this.again = false
      try {
        await this.probe(poll)
      } catch (err) {
        // Never an unhandled rejection from a timer: report it and keep the CRL in force.
        this.refuse('unreadable', `checking the CRL file failed: ${err instanceof Error ? err.message : String(err)}`)
      }
      this.installPendingIfDue()
      this.warnIfExpiring()
      poll = this.againFromPoll
      this.againFromPoll = false
    } while (this.again)
  }

  private tick(): void {
    if (this.opts.watch !== false && this.fsWatcher === undefined) this.startFsWatch()
    void this.check(true)
  }

  private schedule(): void {
    if (!this.running) return
    clearTimeout(this.debounce)
    this.debounce = setTimeout(() => void this.check(), this.opts.debounceMs ?? 50)
    this.debounce.unref()
  }

  private startFsWatch(): void {
    if (this.opts.watch === false) return
    const name = basename(this.opts.path)
    try {
      // persistent: false is the watcher's unref: it never keeps the process alive.
      this.fsWatcher = watch(dirname(this.opts.path), { persistent: false }, (_event, file) => {
        if (file === null || file.toString() === name) this.schedule()
      })
      this.fsWatcher.on('error', () => {
        this.fsWatcher?.close()
        this.fsWatcher = undefined // the periodic check goes on and retries the watch
      })
    } catch {
      this.fsWatcher = undefined // e.g. the directory is gone for now: polling covers it
    }
  }

  private async probe(fromPoll: boolean): Promise<void> {
    const { path } = this.opts
    let before: Stats
    let bytes: Buffer
    try {
      before = await stat(path)
      const fingerprint = fingerprintOf(before)
      const racy = this.now() - before.mtimeMs < RACY_WINDOW_MS
      if (fingerprint === this.lastFingerprint && !racy && this.lastReadError === null) return
      bytes = await readFile(path)
      // A writer still at work changes the stat between our two looks: judge it once it is done.
      if (fingerprintOf(await stat(path)) !== fingerprint) return this.schedule()
      this.lastFingerprint = fingerprint
      // An empty file is a writer between truncate and write, or a replace not done yet: like missing.
      if (bytes.length === 0) throw Object.assign(new Error('empty CRL file'), { code: 'ENOENT' })
    } catch (err) {
      return this.readFailed(err, fromPoll)
    }
    this.missingPolls = 0
    this.lastReadError = null
    const hash = sha256(bytes)
    if (hash === this.lastHash) return
    this.lastHash = hash
    this.judge(bytes.toString('utf8'))
  }

  private readFailed(err: unknown, fromPoll: boolean): void {
    const code = (err as NodeJS.ErrnoException).code ?? 'EIO'
    this.lastFingerprint = null
    this.lastHash = null // whatever comes back is judged afresh
    if (code === 'ENOENT') {
      if (fromPoll) this.missingPolls++
      if (this.missingPolls === (this.opts.missingChecks ?? 3)) {
        this.refuse('missing', `the CRL file ${this.opts.path} is missing`)
      }
      return
    }
    if (this.lastReadError === code) return // reported once until it changes
    this.lastReadError = code
    this.refuse('unreadable', `cannot read the CRL file ${this.opts.path}: ${code}`)
  }

  private judge(pem: string): void {
    const current = this.current
    if (!this.running) return
    let decision: CrlDecision
    try {
      decision = decideCrl(current, pem, this.opts.ca, this.now())
    } catch (err) {
      // Not a CrlError: a bug or an exotic input; refuse rather than crash the timer.
      decision = { kind: 'refuse', reason: 'malformed', message: `the CRL could not be checked: ${err instanceof Error ? err.message : String(err)}` }
    }
    if (decision.kind === 'pending' && this.pending?.der.equals(decision.crl.der) === true) return // re-read, unchanged
    this.dropPending()
    this.apply(decision)
  }

  /** Installs the pending CRL once its thisUpdate has come, deciding afresh against the CRL in force. */
  private installPendingIfDue(): void {
    const { current, pending } = this
    if (pending === null || !this.running) return
    const decision = decideParsedCrl(current, pending, this.now())
    if (decision.kind === 'pending') return
    this.pending = null
    this.apply(decision)
  }

  private apply(decision: CrlDecision): void {
    if (decision.kind === 'same') return
    if (decision.kind === 'refuse') return this.refuse(decision.reason, decision.message, decision.crl?.crlNumber)
    if (decision.kind === 'pending') {
      this.pending = decision.crl
      const onPending = this.opts.onPending
      if (onPending !== undefined) callQuietly(() => onPending(decision.crl))
      return
    }
    // In force before onLoaded runs: what it acts on (dropping revoked connections and nodes) must
    // already see the new CRL; put back if it refuses.
    try {
      this.adopt(decision.crl, () => this.opts.onLoaded(decision.crl))
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err)
      return this.refuse('install_failed', `the CRL could not be installed: ${message}`, decision.crl.crlNumber)
    }
  }

  /** The file no longer holds the pending CRL: it will not be installed. */
  private dropPending(): void {
    const dropped = this.pending
    if (dropped === null) return
    this.pending = null
    const at = dropped.thisUpdate.toISOString()
    this.refuse('superseded', `the pending CRL (number ${dropped.crlNumber ?? 'none'}, valid from ${at}) was replaced in the file before it became valid`, dropped.crlNumber)
  }

  private refuse(reason: CrlRefusalReason, message: string, crlNumber?: bigint | null): void {
    if (!this.running) return
    const details: CrlRefusalDetails = {
      path: this.opts.path,
      message,
      inForceCrlNumber: this.current.crlNumber ?? null,
      ...(crlNumber !== undefined ? { crlNumber } : {}),
    }
    callQuietly(() => this.opts.onRefused(reason, details))
  }

  private warnIfExpiring(): void {
    const crl = this.current
    const onExpiring = this.opts.onExpiring
    if (onExpiring === undefined || !this.running) return
    const now = this.now()
    const msLeft = expiringIn(crl, now)
    if (msLeft === null) return
    if (this.warnedDer === crl.der && now - this.warnedAt < HOUR_MS) return
    this.warnedDer = crl.der
    this.warnedAt = now
    callQuietly(() => onExpiring(crl, msLeft))
  }
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex')
}

function fingerprintOf(s: Stats): string {
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`
}

/** A throwing reporting callback must not stop the watch (it would leave revocation frozen). */
function callQuietly(fn: () => void): void {
  try {
    fn()
  } catch {
    // the caller's own logging failed; nothing better to do from a timer
  }
}
