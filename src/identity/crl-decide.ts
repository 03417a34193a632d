/**
 * The rule for replacing the CRL in force: pure apart from signature checking, with the clock passed in,
 * so the watcher only does I/O and this file holds every decision.
 */
import type { X509Certificate } from 'node:crypto'
import { CrlError, parseCrl, verifyCrl, type ParsedCrl } from './crl.js'

/** Why a new CRL file was not put in force (the previous CRL stays). */
export type CrlRefusalReason =
  | 'missing' // the file stayed missing for several checks
  | 'unreadable' // the file exists but cannot be read (permissions, a directory, ...)
  | 'malformed' // not one well-formed X509 CRL PEM block
  | 'unsupported' // a delta, partitioned or indirect CRL, an unknown critical extension or algorithm
  | 'wrong_issuer' // issued by another CA
  | 'bad_signature' // does not verify under the CA key
  | 'older_crl' // a lower CRL number (or, without numbers, an older thisUpdate) than the one in force
  | 'same_crl_number' // the same CRL number as the one in force with different content
  | 'missing_crl_number' // no CRL number while the one in force has one: cannot be ordered
  | 'not_yet_valid' // thisUpdate too far in the future
  | 'install_failed' // the onLoaded callback threw, e.g. the TLS context could not be rebuilt

/** What to do with a candidate CRL. */
export type CrlDecision =
  | { readonly kind: 'load'; readonly crl: ParsedCrl }
  | { readonly kind: 'same' }
  | { readonly kind: 'refuse'; readonly reason: CrlRefusalReason; readonly message: string; readonly crl?: ParsedCrl }

/**
 * OpenSSL refuses every handshake while a CRL's thisUpdate is in the future (CRL_NOT_YET_VALID), so a
 * CRL from a badly skewed clock would lock every node out; a few minutes of skew are tolerated.
 */
export const MAX_FUTURE_THIS_UPDATE_MS = 5 * 60_000

/** Below this much time to nextUpdate (or past it) the CRL in force is reported as expiring. */
export const EXPIRY_WARNING_MS = 24 * 3_600_000

/**
 * Decides whether `pem` replaces `current`. A CRL number must grow strictly: an equal number with
 * identical bytes is a no-op ('same'); an equal number with other bytes is refused, because two different
 * CRLs with one number means a CA misuse or a replay we cannot order.
 */
export function decideCrl(current: ParsedCrl, pem: string, ca: X509Certificate, nowMs: number): CrlDecision {
  let crl: ParsedCrl
  try {
    crl = parseCrl(pem)
    verifyCrl(crl, ca)
  } catch (err) {
    if (err instanceof CrlError) return { kind: 'refuse', reason: err.code, message: err.message }
    throw err
  }
  if (crl.der.equals(current.der)) return { kind: 'same' }
  const refuse = (reason: CrlRefusalReason, message: string): CrlDecision => ({ kind: 'refuse', reason, message, crl })
  if (crl.thisUpdate.getTime() > nowMs + MAX_FUTURE_THIS_UPDATE_MS) {
    return refuse('not_yet_valid', `the CRL's thisUpdate ${crl.thisUpdate.toISOString()} is in the future: check the CA host's clock`)
  }
  const had = current.crlNumber
  const got = crl.crlNumber
  if (had !== null && got === null) return refuse('missing_crl_number', `the CRL has no CRL number; the one in force has ${had}`)
  if (had !== null && got !== null) {
    if (got < had) return refuse('older_crl', `CRL number ${got} is older than ${had} in force`)
    if (got === had) return refuse('same_crl_number', `CRL number ${got} is already in force with different content`)
  } else if (crl.thisUpdate.getTime() < current.thisUpdate.getTime()) {
    return refuse('older_crl', `the CRL's thisUpdate ${crl.thisUpdate.toISOString()} is older than the one in force`)
  }
  return { kind: 'load', crl }
}

/** Milliseconds left before `crl`'s nextUpdate when under a day (negative when past), else null. */
export function expiringIn(crl: ParsedCrl, nowMs: number): number | null {
  if (crl.nextUpdate === null) return null
  const msLeft = crl.nextUpdate.getTime() - nowMs
  return msLeft < EXPIRY_WARNING_MS ? msLeft : null
}
