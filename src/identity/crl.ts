/**
 * X.509 v2 CRL parsing (RFC 5280 section 5) with our own strict DER reader, and serial normalisation
 * shared with the certificate side. Signature checks live in crl-verify.ts (Node's crypto only).
 */
import {
  DerError,
  TAG,
  childrenOf,
  decodeOid,
  decodeTime,
  decodeUnsigned,
  expectTag,
  integerBytes,
  isTime,
  readDer,
  type DerNode,
} from '../der/der.js'
import type { X509Certificate } from 'node:crypto'
import { CrlError, quoteInput } from './crl-error.js'
import { verifyCrl } from './crl-verify.js'

export { CrlError, type CrlErrorCode } from './crl-error.js'
export { verifyCrl }

/** A parsed (not yet verified) CRL. Serials are normalised with `normalizeSerial`. */
export interface ParsedCrl {
  readonly der: Buffer
  /** Canonical PEM re-encoded from `der` (any text around the block is dropped). */
  readonly pem: string
  readonly tbsDer: Buffer
  /** The tbsCertList's AlgorithmIdentifier, whole (it must equal the outer one). */
  readonly signatureAlgorithmDer: Buffer
  readonly signatureAlgorithmOid: string
  readonly signature: Buffer
  readonly issuerDer: Buffer
  readonly thisUpdate: Date
  readonly nextUpdate: Date | null
  readonly crlNumber: bigint | null
  readonly revokedSerials: ReadonlySet<string>
}

const PEM_LABEL = 'X509 CRL'
const PEM_BLOCK = /-----BEGIN ([^-\r\n]*)-----([\s\S]*?)-----END ([^-\r\n]*)-----/g

const OID_CRL_NUMBER = '2.5.29.20'
const OID_AUTHORITY_KEY_IDENTIFIER = '2.5.29.35'
const OID_DELTA_CRL_INDICATOR = '2.5.29.27'
const OID_ISSUING_DISTRIBUTION_POINT = '2.5.29.28'
const OID_CERTIFICATE_ISSUER = '2.5.29.29'

/**
 * OpenSSL 3 (crypto/x509/x_crl.c, crl_cb) flags a CRL with EXFLAG_CRITICAL, and then refuses every
 * certificate checked against it ("unhandled critical CRL extension"), when a CRL-level extension other
 * than these is critical. Delta CRLs and IDP are refused below anyway, so of these only AKI may pass.
 */
const CRITICAL_OK_IN_CRL = new Set([OID_AUTHORITY_KEY_IDENTIFIER, OID_DELTA_CRL_INDICATOR, OID_ISSUING_DISTRIBUTION_POINT])
/** Likewise for entries (crl_set_issuers): any critical entry extension but certificateIssuer. */
const CRITICAL_OK_IN_ENTRY = new Set([OID_CERTIFICATE_ISSUER])

/**
 * Lower-case hex, no colons or spaces, leading zero bytes stripped: the one form used to compare
 * CRL entries (DER bytes, with a 00 sign byte when the high bit is set) with `X509Certificate.serialNumber`
 * (upper-case hex, sign byte dropped, a leading 0 nibble kept: `0ABC`). Zero is `00`.
 */
export function normalizeSerial(hex: string): string {
  const cleaned = hex.replace(/[:\s]/g, '').toLowerCase()
  if (!/^[0-9a-f]+$/.test(cleaned)) throw new CrlError('malformed', `not a hexadecimal serial: ${JSON.stringify(hex)}`)
  const digits = cleaned.replace(/^0+/, '')
  if (digits === '') return '00'
  return digits.length % 2 === 1 ? `0${digits}` : digits
}

/** Parses a PEM CRL and verifies it under `ca`: the one way a CRL enters the controller. Throws CrlError. */
export function parseVerifiedCrl(pem: string, ca: X509Certificate): ParsedCrl {
  const crl = parseCrl(pem)
  verifyCrl(crl, ca)
  return crl
}

/** Parses a PEM CRL (exactly one `X509 CRL` block); throws `CrlError` on anything malformed. */
export function parseCrl(pem: string): ParsedCrl {
  const der = pemToDer(pem)
  try {
    return parseDer(der)
  } catch (err) {
    if (err instanceof DerError) throw new CrlError('malformed', `not a valid CRL: ${err.message}`)
    throw err
  }
}

/** Canonical PEM for DER bytes, 64 columns, as OpenSSL writes it. */
export function derToPem(der: Buffer, label = PEM_LABEL): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? []
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`
}

function pemToDer(pem: string): Buffer {
  const blocks = [...pem.matchAll(PEM_BLOCK)]
  if (blocks.length === 0) throw new CrlError('malformed', 'no PEM block found: expected one "X509 CRL" block')
  if (blocks.length > 1) throw new CrlError('malformed', `expected exactly one PEM block, found ${blocks.length}`)
  const [, begin, body, end] = blocks[0] as RegExpMatchArray
  if (begin !== PEM_LABEL || end !== PEM_LABEL) {
    throw new CrlError('malformed', `wrong PEM label "${quoteInput(begin ?? '')}": expected "${PEM_LABEL}"`)
  }
  const base64 = (body ?? '').replace(/\s+/g, '')
  if (base64 === '' || !/^[A-Za-z0-9+/]+={0,2}$/.test(base64) || base64.length % 4 !== 0) {
    throw new CrlError('malformed', 'the PEM body is not valid base64')
  }
  return Buffer.from(base64, 'base64')
}

function parseDer(der: Buffer): ParsedCrl {
  const outer = childrenOf(expectTag(readDer(der), TAG.SEQUENCE, 'CertificateList'))
  if (outer.length !== 3) throw new DerError(`CertificateList has ${outer.length} elements, expected 3`)
  const [tbs, outerAlg, sigValue] = outer as [DerNode, DerNode, DerNode]
  expectTag(tbs, TAG.SEQUENCE, 'tbsCertList')
  expectTag(outerAlg, TAG.SEQUENCE, 'signatureAlgorithm')
  const signature = bitStringBytes(sigValue)

  const fields = childrenOf(tbs)
  let i = 0
  let version = 0n
  if (fields[i]?.tag === TAG.INTEGER) version = decodeUnsigned(fields[i++] as DerNode, 'version')
  // A v1 CRL omits the version; only v2 (encoded 1) may be present, and only v2 may carry extensions.
  if (version !== 0n && version !== 1n) throw new DerError(`unknown CRL version ${version}`)
  if (version === 0n && fields[0]?.tag === TAG.INTEGER) throw new DerError('explicit version 0 is not DER')
  const innerAlg = expectTag(fields[i++], TAG.SEQUENCE, 'tbsCertList signature algorithm')
  if (!innerAlg.raw.equals(outerAlg.raw)) {
    throw new CrlError('malformed', 'the signature algorithm inside the CRL differs from the outer one')
  }
  const signatureAlgorithmOid = decodeOid(childrenOf(innerAlg)[0] ?? missing('algorithm OID'))
  const issuer = expectTag(fields[i++], TAG.SEQUENCE, 'issuer')
  const thisUpdate = decodeTime(fields[i++], 'thisUpdate')
  const nextUpdate = isTime(fields[i]) ? decodeTime(fields[i++], 'nextUpdate') : null
  let revokedSerials = new Set<string>()
  if (fields[i]?.tag === TAG.SEQUENCE) revokedSerials = parseRevoked(fields[i++] as DerNode)
  let crlNumber: bigint | null = null
  if (fields[i]?.tag === TAG.CONTEXT_0) {
    if (version !== 1n) throw new DerError('a v1 CRL cannot carry extensions')
    const list = childrenOf(fields[i++] as DerNode)
    if (list.length !== 1) throw new DerError('crlExtensions must hold exactly one SEQUENCE')
    crlNumber = parseCrlExtensions(list[0] as DerNode)
  }
  if (i !== fields.length) throw new DerError('unexpected trailing fields in tbsCertList')
  return {
    der,
    pem: derToPem(der),
    tbsDer: tbs.raw,
    signatureAlgorithmDer: innerAlg.raw,
    signatureAlgorithmOid,
    signature,
    issuerDer: issuer.raw,
    thisUpdate,
    nextUpdate,
    crlNumber,
    revokedSerials,
  }
}

function missing(what: string): never {
  throw new DerError(`${what} is missing`)
}

function bitStringBytes(node: DerNode): Buffer {
  const content = expectTag(node, TAG.BIT_STRING, 'signatureValue').content
  if (content.length < 2 || content[0] !== 0) throw new DerError('signatureValue is not a whole-byte BIT STRING')
  return content.subarray(1)
}

function parseRevoked(list: DerNode): Set<string> {
  const serials = new Set<string>()
  for (const entry of childrenOf(list)) {
    const parts = childrenOf(expectTag(entry, TAG.SEQUENCE, 'revoked certificate entry'))
    // Keep the raw two's-complement bytes: for the positive serials RFC 5280 requires this equals
    // the certificate's serial once both are normalised.
    const serial = integerBytes(parts[0] ?? missing('revoked serial'), 'revoked serial')
    decodeTime(parts[1], 'revocationDate')
    if (parts.length > 3) throw new DerError('revoked certificate entry has too many fields')
    if (parts[2] !== undefined) checkExtensions(parts[2], CRITICAL_OK_IN_ENTRY, 'CRL entry')
    serials.add(normalizeSerial(serial.toString('hex')))
  }
  return serials
}

function parseCrlExtensions(seq: DerNode): bigint | null {
  const byOid = checkExtensions(seq, CRITICAL_OK_IN_CRL, 'CRL')
  const number = byOid.get(OID_CRL_NUMBER)
  return number === undefined ? null : decodeUnsigned(readDer(number), 'CRL number')
}

/** Walks an Extensions SEQUENCE; returns extnValue by OID, refusing what we or OpenSSL do not handle. */
function checkExtensions(seq: DerNode, criticalOk: ReadonlySet<string>, where: string): Map<string, Buffer> {
  const byOid = new Map<string, Buffer>()
  for (const ext of childrenOf(expectTag(seq, TAG.SEQUENCE, `${where} extensions`))) {
    const parts = childrenOf(expectTag(ext, TAG.SEQUENCE, `${where} extension`))
    const oid = decodeOid(parts[0] ?? missing('extension OID'))
    const hasCritical = parts[1]?.tag === TAG.BOOLEAN
    const critical = hasCritical && (parts[1] as DerNode).content[0] !== 0
    const value = expectTag(parts[hasCritical ? 2 : 1], TAG.OCTET_STRING, `${where} extension ${quoteInput(oid)} value`)
    if (byOid.has(oid)) throw new DerError(`${where} extension ${quoteInput(oid)} appears twice`)
    byOid.set(oid, value.content)
    refuseUnsupported(oid, critical, criticalOk, where)
  }
  return byOid
}

function refuseUnsupported(oid: string, critical: boolean, criticalOk: ReadonlySet<string>, where: string): void {
  if (oid === OID_DELTA_CRL_INDICATOR) throw new CrlError('unsupported', 'delta CRLs are not supported')
  if (oid === OID_ISSUING_DISTRIBUTION_POINT) {
    throw new CrlError('unsupported', 'partitioned CRLs (issuing distribution point) are not supported')
  }
  if (oid === OID_CERTIFICATE_ISSUER) throw new CrlError('unsupported', 'indirect CRLs are not supported')
  if (critical && !criticalOk.has(oid)) {
    throw new CrlError(
      'unsupported',
      `the ${where} extension ${quoteInput(oid)} is marked critical, which OpenSSL does not handle: it would refuse every client`,
    )
  }
}
