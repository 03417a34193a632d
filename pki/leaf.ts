/** Leaf certificates (node, operator, server): signing one with the CA, and the rule that a name has one holder. */
import type { LoadedCa } from './ca.js'
import { addDays, buildCertificate, wholeSecond } from './cert-builder.js'
import type { SubjectAttr } from './cert-builder.js'
import { withHistory } from './index-file.js'
import type { CertRecord, CertRole, PkiIndex } from './index-file.js'
import { newSerial } from './serial.js'
import { PkiError, UsageError } from './errors.js'

/** Default lifetime of leaf certificates (node, operator, server). */
export const DEFAULT_LEAF_DAYS = 90

/** One leaf to sign. */
export interface LeafRequest {
  readonly name: string
  readonly role: CertRole
  readonly subject: readonly SubjectAttr[]
  /** The subject's public key as SubjectPublicKeyInfo DER. */
  readonly spkiDer: Buffer
  readonly extensions: readonly object[]
  readonly days: number
  /** A lifetime in ms instead of `days` (enrolled certificates may live less than a day). */
  readonly lifetimeMs?: number
  readonly notBefore: Date
  readonly command: string
  readonly now: Date
  /** Serials of the valid certificates of the same name this one replaces (`--replace`). */
  readonly replaces?: readonly string[]
  /** The enrollment or renewal request it answers (the signer). */
  readonly requestId?: string
}

/** The subject of a client certificate: `CN=<name>, OU=<role>` (SPEC "Identity"). */
export function clientSubject(name: string, role: CertRole): SubjectAttr[] {
  return [{ shortName: 'CN', value: name }, { shortName: 'OU', value: role }]
}

/** Refuses a lifetime that would outlive the CA. */
export function checkWithinCa(ca: LoadedCa, notBefore: Date, days: number): void {
  if (addDays(wholeSecond(notBefore), days) > ca.notAfter) {
    throw new UsageError(`a ${days}-day certificate would outlive the CA (valid until ${ca.notAfter.toISOString()})`)
  }
}

/** Signs one leaf with the CA and returns it with its index record. */
export async function signLeaf(ca: LoadedCa, req: LeafRequest): Promise<{ certPem: string; record: CertRecord }> {
  const notBefore = wholeSecond(req.notBefore)
  const notAfter = req.lifetimeMs === undefined ? addDays(notBefore, req.days) : new Date(notBefore.getTime() + req.lifetimeMs)
  if (req.lifetimeMs === undefined) checkWithinCa(ca, req.notBefore, req.days)
  else if (notAfter > ca.notAfter) throw new UsageError(`the certificate would outlive the CA (valid until ${ca.notAfter.toISOString()})`)
  const serial = newSerial()
  const certPem = await buildCertificate({ serial, subject: req.subject, spkiDer: req.spkiDer, notBefore, notAfter, extensions: req.extensions }, ca)
  const record: CertRecord = {
    serial,
    name: req.name,
    role: req.role,
    not_before: notBefore.toISOString(),
    not_after: notAfter.toISOString(),
    command: req.command,
    issued_at: req.now.toISOString(),
    ...(req.replaces !== undefined && req.replaces.length > 0 ? { replaces: [...req.replaces] } : {}),
    ...(req.requestId === undefined ? {} : { request_id: req.requestId }),
  }
  return { certPem, record }
}

/** The index with more certificate records and one history line. */
export function withCerts(index: PkiIndex, records: readonly CertRecord[], command: string, detail: string, now: Date): PkiIndex {
  return withHistory({ ...index, certs: [...index.certs, ...records] }, now, command, detail)
}

/** Certificates that hold `name` at `now`: not revoked, not expired (not-yet-valid ones included), any role. */
export function holdersOf(index: PkiIndex, name: string, now: Date): CertRecord[] {
  return index.certs.filter((c) => c.name === name && c.revoked_at === undefined && new Date(c.not_after) > now)
}

/**
 * The holders `name` would replace; without `replace` any holder is a refusal: a second certificate of a
 * name with a later notBefore takes the node's identity over (SPEC "Rotation and conflict").
 */
export function checkReplace(index: PkiIndex, name: string, now: Date, replace: boolean): string[] {
  const holders = holdersOf(index, name, now)
  const first = holders[0]
  if (first !== undefined && !replace) {
    const more = holders.length > 1 ? `; and ${holders.length - 1} more` : ''
    throw new PkiError(
      `"${name}" already holds a valid certificate (${first.role}, serial ${first.serial}, until ${first.not_after}${more}); ` +
        'pass --replace for a planned rotation (the old certificate stays valid until you revoke it), or revoke it first',
    )
  }
  return holders.map((c) => c.serial)
}

/** The sentence that tells an operator what a replacement left to do. */
export function replacementNote(replaces: readonly string[]): string {
  if (replaces.length === 0) return ''
  const revoke = replaces.map((s) => `"pxe-pki revoke --serial ${s}"`).join(', then ')
  return `replaces ${replaces.join(', ')} (still valid: once the device uses the new certificate, revoke the old one with ${revoke})`
}
