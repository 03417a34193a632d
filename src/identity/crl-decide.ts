/**
 * The rule for replacing the CRL in force: pure apart from signature checking, with the clock passed in,
 * so the watcher only does I/O and this file holds every decision.
 *
 * Time rule (OpenSSL 3, x509_vfy.c check_crl_time, has no tolerance): a CRL is usable at `now` when
 * thisUpdate <= now and, if it has one, now < nextUpdate; otherwise OpenSSL refuses every client
 * (CRL_NOT_YET_VALID, CRL_HAS_EXPIRED). So a newer CRL is
 * - installed when it is usable now;
 * - held as pending while its thisUpdate is in the future (a CA host with a fast clock), the CRL in
 *   force staying, and decided again once thisUpdate has passed;
 * - refused when it is past its nextUpdate, unless the CRL in force is past its own too: then every
 *   client is refused either way, and the newer list of revocations is the better one to hold.
 */
import type { X509Certificate } from 'node:crypto'
import { CrlError, parseVerifiedCrl, type ParsedCrl } from './crl.js'

/** Why a new CRL file was not put in force (the previous CRL stays). */
export type CrlRefusalReason =
  | 'missing' // the file stayed missing for several checks
  | 'unreadable' // the file exists but cannot be read (permissions, a directory, ...)
  | 'malformed' // not one well-formed X509 CRL PEM block, or dates that can never be valid
  | 'unsupported' // a delta, partitioned or indirect CRL, a critical extension OpenSSL does not handle, an unknown algorithm
  | 'wrong_issuer' // issued by another CA
  | 'bad_signature' // does not verify under the CA key
  | 'older_crl' // a lower CRL number (or, without numbers, an older thisUpdate) than the one in force
  | 'same_crl_number' // the same CRL number as the one in force with different content
  | 'missing_crl_number' // no CRL number while the one in force has one: cannot be ordered
  | 'expired_crl' // past its nextUpdate while the one in force is not
  | 'superseded' // a pending CRL left the file before its thisUpdate came
  | 'install_failed' // the onLoaded callback threw, e.g. the TLS context could not be rebuilt
  | 'not_yet_valid' // a pushed CRL whose thisUpdate is in the future (a file's waits as pending instead)
  | 'expires_soon' // a pushed CRL with less than an hour to its nextUpdate

/** What to do with a candidate CRL. */
export type CrlDecision =
  | { readonly kind: 'load'; readonly crl: ParsedCrl }
  | { readonly kind: 'pending'; readonly crl: ParsedCrl }
  | { readonly kind: 'same' }
  | { readonly kind: 'refuse'; readonly reason: CrlRefusalReason; readonly message: string; readonly crl?: ParsedCrl }

/** Where `now` stands in a CRL's validity window, as OpenSSL sees it. */
export type CrlTimeState = 'not_yet_valid' | 'valid' | 'expired'

/** Below this much time to nextUpdate (or past it) the CRL in force is reported as expiring. */
export const EXPIRY_WARNING_MS = 24 * 3_600_000

/** OpenSSL's verdict on a CRL's dates at `nowMs` (both bounds compared as OpenSSL does: <=). */
export function crlTimeState(crl: ParsedCrl, nowMs: number): CrlTimeState {
  if (crl.thisUpdate.getTime() > nowMs) return 'not_yet_valid'
  if (crl.nextUpdate !== null && crl.nextUpdate.getTime() <= nowMs) return 'expired'
  return 'valid'
}

/** Parses and verifies `pem`, then decides as `decideParsedCrl` does. */
export function decideCrl(current: ParsedCrl, pem: string, ca: X509Certificate, nowMs: number): CrlDecision {
  let crl: ParsedCrl
  try {
    crl = parseVerifiedCrl(pem, ca)
  } catch (err) {
    if (err instanceof CrlError) return { kind: 'refuse', reason: err.code, message: err.message }
    throw err
  }
  return decideParsedCrl(current, crl, nowMs)
}

/**
 * Decides whether a verified `crl` replaces `current`. A CRL number must grow strictly: an equal number
 * with identical bytes is a no-op ('same'); an equal number with other bytes is refused, because two
 * different CRLs with one number means a CA misuse or a replay we cannot order. Then the time rule of
 * the file comment.
 */
export function decideParsedCrl(current: ParsedCrl, crl: ParsedCrl, nowMs: number): CrlDecision {
  if (crl.der.equals(current.der)) return { kind: 'same' }
  const refuse = (reason: CrlRefusalReason, message: string): CrlDecision => ({ kind: 'refuse', reason, message, crl })
  const older = orderingProblem(current, crl)
  if (older !== null) return refuse(older.reason, older.message)
  if (crl.nextUpdate !== null && crl.nextUpdate.getTime() <= crl.thisUpdate.getTime()) {
    return refuse('malformed', `the CRL's nextUpdate ${crl.nextUpdate.toISOString()} is not after its thisUpdate: it is never valid`)
  }
  switch (crlTimeState(crl, nowMs)) {
    case 'not_yet_valid':
      return { kind: 'pending', crl }
    case 'expired':
      if (crlTimeState(current, nowMs) === 'expired') return { kind: 'load', crl }
      return refuse('expired_crl', `the CRL's nextUpdate ${crl.nextUpdate?.toISOString()} has passed: OpenSSL would refuse every client; publish a fresh CRL (pxe-pki crl)`)
    case 'valid':
      return { kind: 'load', crl }
  }
}

/**
 * True when `crl` is newer than `current` by the ordering rule alone (a higher CRL number, or without
 * numbers a later thisUpdate): how a start picks between the file and the pushed copy, times aside.
 */
export function isNewerCrl(current: ParsedCrl, crl: ParsedCrl): boolean {
  return !crl.der.equals(current.der) && orderingProblem(current, crl) === null
}

/** Why `crl` cannot follow `current`, or null when it is newer. */
function orderingProblem(current: ParsedCrl, crl: ParsedCrl): { reason: CrlRefusalReason; message: string } | null {
  const had = current.crlNumber
  const got = crl.crlNumber
  if (had !== null && got === null) return { reason: 'missing_crl_number', message: `the CRL has no CRL number; the one in force has ${had}` }
  if (had !== null && got !== null) {
    if (got < had) return { reason: 'older_crl', message: `CRL number ${got} is older than ${had} in force` }
    if (got === had) return { reason: 'same_crl_number', message: `CRL number ${got} is already in force with different content` }
  } else if (crl.thisUpdate.getTime() < current.thisUpdate.getTime()) {
    return { reason: 'older_crl', message: `the CRL's thisUpdate ${crl.thisUpdate.toISOString()} is older than the one in force` }
  }
  return null
}

/**
 * A pushed CRL must have at least this long to its nextUpdate. Once the CRL in force expires, OpenSSL
 * refuses every client — the operator too, so no push could mend it and only a new `tls.crl` on every
 * replica would. A CRL a minute from expiry is a lock-out with a timer; an hour leaves time to push the
 * next one. (A file's CRL is not held to this: the file is the operator's own last resort.)
 */
export const MIN_PUSHED_CRL_LIFETIME_MS = 3_600_000

/** Why a push of `crl` must be refused for its remaining lifetime at `nowMs`, or null. */
export function pushLifetimeProblem(crl: ParsedCrl, nowMs: number): string | null {
  if (crl.nextUpdate === null) return null
  const left = crl.nextUpdate.getTime() - nowMs
  if (left >= MIN_PUSHED_CRL_LIFETIME_MS) return null
  return `the CRL's nextUpdate ${crl.nextUpdate.toISOString()} is less than an hour away: once it passes, OpenSSL refuses every client (the operator's push too); publish one valid for longer (pxe-pki crl --crl-days N)`
}

/** Milliseconds left before `crl`'s nextUpdate when under a day (negative when past), else null. */
export function expiringIn(crl: ParsedCrl, nowMs: number): number | null {
  if (crl.nextUpdate === null) return null
  const msLeft = crl.nextUpdate.getTime() - nowMs
  return msLeft < EXPIRY_WARNING_MS ? msLeft : null
}
