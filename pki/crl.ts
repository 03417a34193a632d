/**
 * X.509 v2 CRLs (RFC 5280 §5). node-forge has no CRL builder, so the DER is assembled with forge.asn1
 * and signed by node:crypto with the CA key (ca-signer.ts).
 */
import forge from 'node-forge'
import type { LoadedCa } from './ca.js'
import { signStructure, toPem } from './ca-signer.js'
import { UsageError } from './errors.js'

const { asn1 } = forge
const U = asn1.Class.UNIVERSAL
const T = asn1.Type

/** Default CRL lifetime (`nextUpdate` - `thisUpdate`). */
export const DEFAULT_CRL_DAYS = 7

/** RFC 5280 CRLReason codes, by the names operators pass to `--reason`. */
export const REVOCATION_REASONS = {
  unspecified: 0,
  keyCompromise: 1,
  cACompromise: 2,
  affiliationChanged: 3,
  superseded: 4,
  cessationOfOperation: 5,
  certificateHold: 6,
  privilegeWithdrawn: 9,
  aACompromise: 10,
} as const
export type RevocationReason = keyof typeof REVOCATION_REASONS

/** Checks a `--reason` value (RFC 5280 name, e.g. keyCompromise). */
export function parseReason(value: string): RevocationReason {
  if (!Object.hasOwn(REVOCATION_REASONS, value)) {
    throw new UsageError(`invalid reason "${value.slice(0, 40)}": use one of ${Object.keys(REVOCATION_REASONS).join(', ')}`)
  }
  return value as RevocationReason
}

/** One revoked certificate, as listed in the CRL. */
export interface CrlEntry {
  readonly serial: string
  readonly revokedAt: Date
  readonly reason: RevocationReason
}

function time(date: Date): forge.asn1.Asn1 {
  // RFC 5280: UTCTime through 2049, GeneralizedTime from 2050.
  return date.getUTCFullYear() < 2050
    ? asn1.create(U, T.UTCTIME, false, asn1.dateToUtcTime(date))
    : asn1.create(U, T.GENERALIZEDTIME, false, asn1.dateToGeneralizedTime(date))
}

function integerFromHex(hex: string): forge.asn1.Asn1 {
  let even = hex.length % 2 === 0 ? hex : `0${hex}`
  if (Number.parseInt(even.slice(0, 2), 16) >= 0x80) even = `00${even}` // keep it positive
  return asn1.create(U, T.INTEGER, false, forge.util.hexToBytes(even))
}

function extension(oid: string, value: forge.asn1.Asn1): forge.asn1.Asn1 {
  return asn1.create(U, T.SEQUENCE, true, [
    asn1.create(U, T.OID, false, asn1.oidToDer(oid).getBytes()),
    asn1.create(U, T.OCTETSTRING, false, asn1.toDer(value).getBytes()),
  ])
}

function revokedEntry(entry: CrlEntry): forge.asn1.Asn1 {
  const reason = asn1.create(U, T.ENUMERATED, false, String.fromCharCode(REVOCATION_REASONS[entry.reason]))
  return asn1.create(U, T.SEQUENCE, true, [
    integerFromHex(entry.serial),
    time(entry.revokedAt),
    asn1.create(U, T.SEQUENCE, true, [extension('2.5.29.21', reason)]),
  ])
}

/** What one CRL says. */
export interface CrlSpec {
  readonly crlNumber: number
  readonly thisUpdate: Date
  readonly nextUpdate: Date
  readonly entries: readonly CrlEntry[]
}

/** Builds and signs a v2 CRL; returns it PEM-encoded with the label `X509 CRL`. */
export async function buildCrl(ca: LoadedCa, spec: CrlSpec): Promise<string> {
  const crlExtensions: forge.asn1.Asn1[] = [extension('2.5.29.20', asn1.create(U, T.INTEGER, false, asn1.integerToDer(spec.crlNumber).getBytes()))]
  if (ca.keyId !== null) {
    const aki = asn1.create(U, T.SEQUENCE, true, [asn1.create(asn1.Class.CONTEXT_SPECIFIC, 0, false, ca.keyId)])
    crlExtensions.unshift(extension('2.5.29.35', aki))
  }
  const tbs = asn1.create(U, T.SEQUENCE, true, [
    asn1.create(U, T.INTEGER, false, asn1.integerToDer(1).getBytes()), // v2
    ca.signer.algorithmIdentifier(),
    ca.name,
    time(spec.thisUpdate),
    time(spec.nextUpdate),
    // RFC 5280: when there are no revoked certificates the list is absent, not empty.
    ...(spec.entries.length > 0 ? [asn1.create(U, T.SEQUENCE, true, spec.entries.map(revokedEntry))] : []),
    asn1.create(asn1.Class.CONTEXT_SPECIFIC, 0, true, [asn1.create(U, T.SEQUENCE, true, crlExtensions)]),
  ])
  return toPem('X509 CRL', await signStructure(tbs, ca.signer))
}
