/**
 * The CRL a controller starts with: the configured file, verified under the CA, and never older than the
 * highest CRL number installed before the restart (recorded in the state), which would undo revocations.
 */
import type { X509Certificate } from 'node:crypto'
import { crlTimeState, isNewerCrl } from './crl-decide.js'
import { parseVerifiedCrl, type ParsedCrl } from './crl.js'

/** Loads and checks the CRL the config names: it is enforced from the first handshake. */
export function loadInitialCrl(pem: string, ca: X509Certificate, path: string): ParsedCrl {
  try {
    return parseVerifiedCrl(pem, ca)
  } catch (err) {
    throw new Error(`key "tls.crl": ${path} is not a CRL signed by the configured CA (${(err as Error).message})`)
  }
}

/**
 * Throws a message for the operator when `crl` is older than `recorded` (the decimal CRL number the state
 * holds, if any): a restart must not bring back certificates revoked since. Called before anything is
 * written, so a refused start changes nothing.
 */
export function assertNotRolledBack(crl: ParsedCrl, recorded: string | undefined, path: string): void {
  if (recorded === undefined) return
  const before = BigInt(recorded)
  const fix =
    'Put the newest CRL in its place (on the CA host, "pxe-pki crl" writes a fresh one to copy here) and start again; nothing was changed.'
  if (crl.crlNumber === null) {
    throw new Error(`key "tls.crl": ${path} has no CRL number, but CRL number ${before} was in force before this restart (recorded in the state): starting on it could undo revocations. ${fix}`)
  }
  if (crl.crlNumber < before) {
    throw new Error(`key "tls.crl": ${path} is CRL number ${crl.crlNumber}, older than CRL number ${before} that was in force before this restart (recorded in the state): starting on it would undo the revocations published since. ${fix}`)
  }
}

/**
 * A warning when OpenSSL cannot use the starting CRL now (every client is refused until it can), else
 * null. The start goes on: there is no other CRL to fall back on, and the controller recovers by itself
 * when thisUpdate comes or a fresh CRL is written.
 */
export function startupCrlWarning(crl: ParsedCrl, nowMs: number): string | null {
  switch (crlTimeState(crl, nowMs)) {
    case 'not_yet_valid':
      return `the CRL's thisUpdate ${crl.thisUpdate.toISOString()} is in the future: OpenSSL refuses every client until then (check the CA host's clock)`
    case 'expired':
      return `the CRL's nextUpdate ${crl.nextUpdate?.toISOString()} has passed: OpenSSL refuses every client until a fresh CRL is written (pxe-pki crl)`
    case 'valid':
      return null
  }
}

/**
 * The CRL a start uses: the pushed copy when it is newer than the `tls.crl` file by the ordering rule (a
 * higher CRL number), else the file. Times do not decide here, as they never decide a start: a stale
 * starting CRL is warned about (startupCrlWarning), never swapped for an older one.
 */
export function pickStartingCrl(file: ParsedCrl, pushed: ParsedCrl | null): { crl: ParsedCrl; pushed: boolean } {
  if (pushed !== null && isNewerCrl(file, pushed)) return { crl: pushed, pushed: true }
  return { crl: file, pushed: false }
}
