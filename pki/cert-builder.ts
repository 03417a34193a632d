/**
 * X.509 v3 certificates: node-forge builds the TBSCertificate, the subject key goes in as the
 * SubjectPublicKeyInfo DER that node:crypto exported (RSA or EC alike), and the CA signs with node:crypto.
 */
import { createHash } from 'node:crypto'
import forge from 'node-forge'
import { signStructure, toPem } from './ca-signer.js'
import type { CaSigner } from './ca-signer.js'
import { childrenOf, readDer } from '../src/der/der.js'

const { asn1 } = forge

/** Parts of node-forge's API that @types/node-forge does not declare. */
const forgeApi = {
  getTBSCertificate: (forge.pki as unknown as { getTBSCertificate(cert: forge.pki.Certificate): forge.asn1.Asn1 }).getTBSCertificate,
  fromDer: asn1.fromDer as unknown as (bytes: string, options: { strict: boolean; decodeBitStrings: boolean }) => forge.asn1.Asn1,
}

/** A subject attribute, e.g. `{ shortName: 'CN', value: 'node-1' }`. */
export interface SubjectAttr {
  readonly shortName: 'CN' | 'OU' | 'O'
  readonly value: string
}

/** The signer of a certificate: the CA (or the key itself, for the self-signed CA). */
export interface Issuer {
  /** The CA's subject Name, the exact bytes of its certificate (as forge ASN.1). */
  readonly name: forge.asn1.Asn1
  readonly signer: CaSigner
  /** Binary string of the issuer's subject key identifier, for the authority key identifier. */
  readonly keyId: string | null
}

/** Everything one certificate needs. */
export interface CertSpec {
  readonly serial: string
  readonly subject: readonly SubjectAttr[]
  /** The subject's public key as SubjectPublicKeyInfo DER (node:crypto `export({ type: 'spki', format: 'der' })`). */
  readonly spkiDer: Buffer
  readonly notBefore: Date
  readonly notAfter: Date
  readonly extensions: readonly object[]
}

/** Index of subjectPublicKeyInfo in forge's TBSCertificate (version, serial, signature, issuer, validity, subject, spki). */
const TBS_SPKI = 6
/** Index of the signature AlgorithmIdentifier in the TBSCertificate. */
const TBS_SIGNATURE = 2
/** Index of the issuer Name in the TBSCertificate. */
const TBS_ISSUER = 3

/** Parses DER into forge ASN.1, BIT STRINGs kept as bytes (an EC point must not be mistaken for nested ASN.1). */
export function derToAsn1(der: Buffer): forge.asn1.Asn1 {
  return forgeApi.fromDer(der.toString('binary'), { strict: true, decodeBitStrings: false })
}

/** X.509 times have 1-second resolution; dropping milliseconds keeps the index and the certificate equal. */
export function wholeSecond(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000)
}

/** `date` plus `days` whole days. */
export function addDays(date: Date, days: number): Date {
  return new Date(date.getTime() + days * 86_400_000)
}

/** RFC 5280 §4.2.1.2 method 1: SHA-1 of the subjectPublicKey BIT STRING (without its unused-bits byte); binary string. */
export function keyIdentifier(spkiDer: Buffer): string {
  const bitString = childrenOf(readDer(spkiDer))[1]
  if (bitString === undefined || bitString.tag !== 0x03) throw new Error('not a SubjectPublicKeyInfo')
  return createHash('sha1').update(bitString.content.subarray(1)).digest('binary')
}

// forge can encode only RSA keys into a TBS; this stand-in holds the slot until the real SPKI replaces it.
const SPKI_STAND_IN = forge.pki.rsa.setPublicKey(new forge.jsbn.BigInteger('1'), new forge.jsbn.BigInteger('1'))

/** The TBSCertificate as forge ASN.1, with the real SPKI, the CA's exact issuer Name and the signer's AlgorithmIdentifier spliced in. */
function tbsCertificate(spec: CertSpec, issuer: Issuer | 'self', signer: CaSigner): forge.asn1.Asn1 {
  const cert = forge.pki.createCertificate()
  cert.serialNumber = spec.serial
  cert.publicKey = SPKI_STAND_IN
  cert.validity.notBefore = spec.notBefore
  cert.validity.notAfter = spec.notAfter
  // UTF8String, not forge's default PrintableString, which has no "_" (allowed by the name rule).
  const utf8 = forge.asn1.Type.UTF8 as unknown as forge.asn1.Class // @types/node-forge mistypes this field
  const subject: forge.pki.CertificateField[] = spec.subject.map((a) => ({ shortName: a.shortName, value: a.value, valueTagClass: utf8 }))
  cert.setSubject(subject)
  cert.setIssuer(issuer === 'self' ? subject : [])
  const ski = keyIdentifier(spec.spkiDer)
  const extensions: object[] = [...spec.extensions, { name: 'subjectKeyIdentifier', value: asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OCTETSTRING, false, ski) }]
  if (issuer !== 'self' && issuer.keyId !== null) extensions.push({ name: 'authorityKeyIdentifier', keyIdentifier: issuer.keyId })
  cert.setExtensions(extensions as forge.pki.CertificateField[])
  cert.siginfo.algorithmOid = signer.algorithmOid
  const tbs = forgeApi.getTBSCertificate(cert)
  const fields = tbs.value as forge.asn1.Asn1[]
  fields[TBS_SIGNATURE] = signer.algorithmIdentifier()
  if (issuer !== 'self') fields[TBS_ISSUER] = issuer.name
  fields[TBS_SPKI] = derToAsn1(spec.spkiDer)
  return tbs
}

/** Builds a certificate, signs it with node:crypto and PEM-encodes it. */
export async function buildCertificate(spec: CertSpec, issuer: Issuer | 'self', selfSigner?: CaSigner): Promise<string> {
  const signer = issuer === 'self' ? selfSigner : issuer.signer
  if (signer === undefined) throw new Error('a self-signed certificate needs its own signer')
  return toPem('CERTIFICATE', await signStructure(tbsCertificate(spec, issuer, signer), signer))
}

/** Extensions of the CA: CA:true pathlen 0 and keyCertSign/cRLSign, both critical (the SKI is added by the builder). */
export function caExtensions(): object[] {
  return [
    { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
  ]
}

/** Key usages a leaf key may have: RSA also encrypts (TLS 1.2 RSA key transport); an EC key only signs (RFC 5480). */
function leafKeyUsage(keyType: 'rsa' | 'ec'): object {
  return keyType === 'rsa'
    ? { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true }
    : { name: 'keyUsage', digitalSignature: true, critical: true }
}

/** Extensions of a client (node/operator) certificate: clientAuth only, never a CA. */
export function clientExtensions(keyType: 'rsa' | 'ec'): object[] {
  return [
    { name: 'basicConstraints', cA: false, critical: true },
    leafKeyUsage(keyType),
    { name: 'extKeyUsage', clientAuth: true },
  ]
}

/** Extensions of the controller's TLS certificate: serverAuth with its DNS and IP SANs. */
export function serverExtensions(dns: readonly string[], ips: readonly string[], keyType: 'rsa' | 'ec'): object[] {
  const altNames = [...dns.map((value) => ({ type: 2, value })), ...ips.map((ip) => ({ type: 7, ip }))]
  return [
    { name: 'basicConstraints', cA: false, critical: true },
    leafKeyUsage(keyType),
    { name: 'extKeyUsage', serverAuth: true },
    { name: 'subjectAltName', altNames },
  ]
}
