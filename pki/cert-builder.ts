/** Builds and signs X.509 v3 certificates with node-forge (SHA-256; forge would default to SHA-1). */
import forge from 'node-forge'

/** A subject attribute, e.g. `{ shortName: 'CN', value: 'node-1' }`. */
export interface SubjectAttr {
  readonly shortName: 'CN' | 'OU' | 'O'
  readonly value: string
}

/** The signer of a certificate: the CA (or the key itself, for the self-signed CA). */
export interface Issuer {
  readonly subject: forge.pki.CertificateField[]
  readonly privateKey: forge.pki.rsa.PrivateKey
  /** Binary string of the issuer's subject key identifier, for the authority key identifier. */
  readonly keyId: string | null
}

/** Everything one certificate needs. */
export interface CertSpec {
  readonly serial: string
  readonly subject: readonly SubjectAttr[]
  readonly publicKey: forge.pki.rsa.PublicKey
  readonly notBefore: Date
  readonly notAfter: Date
  readonly extensions: readonly object[]
}

/** X.509 times have 1-second resolution; dropping milliseconds keeps the index and the certificate equal. */
export function wholeSecond(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000)
}

/** `date` plus `days` whole days. */
export function addDays(date: Date, days: number): Date {
  return new Date(date.getTime() + days * 86_400_000)
}

/** Builds, signs (sha256WithRSAEncryption) and PEM-encodes a certificate. */
export function buildCertificate(spec: CertSpec, issuer: Issuer | 'self', signerKey?: forge.pki.rsa.PrivateKey): string {
  const cert = forge.pki.createCertificate()
  cert.serialNumber = spec.serial
  cert.publicKey = spec.publicKey
  cert.validity.notBefore = spec.notBefore
  cert.validity.notAfter = spec.notAfter
  // UTF8String, not forge's default PrintableString, which has no "_" (allowed by the name rule).
  const utf8 = forge.asn1.Type.UTF8 as unknown as forge.asn1.Class // @types/node-forge mistypes this field
  const subject: forge.pki.CertificateField[] = spec.subject.map((a) => ({ shortName: a.shortName, value: a.value, valueTagClass: utf8 }))
  cert.setSubject(subject)
  const extensions = [...spec.extensions]
  if (issuer === 'self') {
    cert.setIssuer(subject)
  } else {
    cert.setIssuer(issuer.subject)
    if (issuer.keyId !== null) extensions.push({ name: 'authorityKeyIdentifier', keyIdentifier: issuer.keyId })
  }
  cert.setExtensions(extensions as forge.pki.CertificateField[])
  const key = issuer === 'self' ? signerKey : issuer.privateKey
  if (key === undefined) throw new Error('a self-signed certificate needs its private key')
  cert.sign(key, forge.md.sha256.create())
  return forge.pki.certificateToPem(cert).replaceAll('\r\n', '\n')
}

/** Extensions of the CA: CA:true pathlen 0 and keyCertSign/cRLSign, both critical, plus the SKI. */
export function caExtensions(): object[] {
  return [
    { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]
}

/** Extensions of a client (node/operator) certificate: clientAuth only, never a CA. */
export function clientExtensions(): object[] {
  return [
    { name: 'basicConstraints', cA: false, critical: true },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', clientAuth: true },
    { name: 'subjectKeyIdentifier' },
  ]
}

/** Extensions of the controller's TLS certificate: serverAuth with its DNS and IP SANs. */
export function serverExtensions(dns: readonly string[], ips: readonly string[]): object[] {
  const altNames = [...dns.map((value) => ({ type: 2, value })), ...ips.map((ip) => ({ type: 7, ip }))]
  return [
    { name: 'basicConstraints', cA: false, critical: true },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true },
    { name: 'subjectAltName', altNames },
    { name: 'subjectKeyIdentifier' },
  ]
}
