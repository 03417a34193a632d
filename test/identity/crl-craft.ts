/**
 * Test helper: CRLs of shapes `openssl ca` cannot make (any extension, critical or not, on the CRL or on
 * its one entry), assembled with node-forge's ASN.1 (not our own DER code) and signed with a CA's key.
 */
import { createPrivateKey, sign } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import forge from 'node-forge'

const { asn1 } = forge
const U = asn1.Class.UNIVERSAL
const CTX = asn1.Class.CONTEXT_SPECIFIC
const T = asn1.Type

/** One extension to put in a crafted CRL. */
export interface CraftedExtension {
  readonly oid: string
  readonly critical: boolean
  readonly value: forge.asn1.Asn1
}

/** What a crafted CRL holds; the entry is for `serialHex`, revoked an hour before thisUpdate. */
export interface CraftSpec {
  readonly caCertPem: string
  readonly caKeyPem: string
  readonly thisUpdate: Date
  readonly nextUpdate: Date
  readonly extensions: readonly CraftedExtension[]
  readonly entry?: { readonly serialHex: string; readonly extensions: readonly CraftedExtension[] }
}

const oid = (dotted: string) => asn1.create(U, T.OID, false, asn1.oidToDer(dotted).getBytes())
const seq = (...items: forge.asn1.Asn1[]) => asn1.create(U, T.SEQUENCE, true, items)
const uri = (text: string) => asn1.create(CTX, 6, false, text)
const time = (d: Date) => asn1.create(U, T.UTCTIME, false, asn1.dateToUtcTime(d))

/** Extension values by name, each well-formed for its type. */
export const EXTENSION_VALUES = {
  crlNumber: (n: number) => asn1.create(U, T.INTEGER, false, asn1.integerToDer(n).getBytes()),
  authorityKeyIdentifier: (keyIdHex: string) => seq(asn1.create(CTX, 0, false, forge.util.hexToBytes(keyIdHex))),
  issuerAltName: () => seq(asn1.create(CTX, 2, false, 'ca.example')),
  // CRLDistributionPoints: one DistributionPoint with a fullName URI.
  freshestCrl: () => seq(seq(asn1.create(CTX, 0, true, [asn1.create(CTX, 0, true, [uri('http://ca.example/delta.crl')])]))),
  authorityInfoAccess: () => seq(seq(oid('1.3.6.1.5.5.7.48.2'), uri('http://ca.example/ca.pem'))),
  unknown: () => asn1.create(U, T.UTF8, false, 'private'),
  reasonCode: () => asn1.create(U, T.ENUMERATED, false, String.fromCharCode(1)),
  invalidityDate: (d: Date) => asn1.create(U, T.GENERALIZEDTIME, false, asn1.dateToGeneralizedTime(d)),
}

/** An OID under a private enterprise arc that no library knows. */
export const UNKNOWN_OID = '1.3.6.1.4.1.55555.1'

/** The CA certificate's subjectKeyIdentifier, in hex, as OpenSSL prints it. */
export function subjectKeyIdHex(caCertPath: string): string {
  const text = execFileSync('openssl', ['x509', '-in', caCertPath, '-noout', '-ext', 'subjectKeyIdentifier'], { encoding: 'utf8' })
  const hex = /([0-9A-F]{2}(?::[0-9A-F]{2})+)/.exec(text)?.[1]
  if (hex === undefined) throw new Error(`no subjectKeyIdentifier in ${caCertPath}`)
  return hex.replace(/:/g, '').toLowerCase()
}

function extension(ext: CraftedExtension): forge.asn1.Asn1 {
  const critical = ext.critical ? [asn1.create(U, T.BOOLEAN, false, String.fromCharCode(0xff))] : []
  return seq(oid(ext.oid), ...critical, asn1.create(U, T.OCTETSTRING, false, asn1.toDer(ext.value).getBytes()))
}

/** The subject Name of a certificate, as it is encoded there (the CRL's issuer must match it). */
function subjectOf(certPem: string): forge.asn1.Asn1 {
  const der = forge.pem.decode(certPem)[0]?.body ?? ''
  const tbs = (asn1.fromDer(der).value as forge.asn1.Asn1[])[0] as forge.asn1.Asn1
  const fields = tbs.value as forge.asn1.Asn1[]
  const start = fields[0]?.tagClass === CTX ? 1 : 0
  return fields[start + 4] as forge.asn1.Asn1
}

/** Builds and signs the CRL `spec` describes (RSA: sha256WithRSAEncryption; EC: ecdsa-with-SHA256). */
export function craftCrl(spec: CraftSpec): string {
  const key = createPrivateKey(spec.caKeyPem)
  const algorithm = key.asymmetricKeyType === 'rsa'
    ? seq(oid('1.2.840.113549.1.1.11'), asn1.create(U, T.NULL, false, ''))
    : seq(oid('1.2.840.10045.4.3.2'))
  const entries = spec.entry === undefined ? [] : [seq(seq(
    asn1.create(U, T.INTEGER, false, forge.util.hexToBytes(spec.entry.serialHex)),
    time(new Date(spec.thisUpdate.getTime() - 3_600_000)),
    ...(spec.entry.extensions.length > 0 ? [seq(...spec.entry.extensions.map(extension))] : []),
  ))]
  const tbs = seq(
    asn1.create(U, T.INTEGER, false, asn1.integerToDer(1).getBytes()), // v2
    algorithm,
    subjectOf(spec.caCertPem),
    time(spec.thisUpdate),
    time(spec.nextUpdate),
    ...entries,
    ...(spec.extensions.length > 0 ? [asn1.create(CTX, 0, true, [seq(...spec.extensions.map(extension))])] : []),
  )
  const tbsDer = Buffer.from(asn1.toDer(tbs).getBytes(), 'binary')
  const signature = sign('sha256', tbsDer, key).toString('binary')
  const crl = seq(tbs, algorithm, asn1.create(U, T.BITSTRING, false, `\0${signature}`))
  return forge.pem.encode({ type: 'X509 CRL', body: asn1.toDer(crl).getBytes() }).replaceAll('\r\n', '\n')
}
