/**
 * CRL signature verification with Node's `crypto.verify` only (never node-forge's verifier, which has
 * a history of signature-forgery bugs).
 */
import { verify, type X509Certificate } from 'node:crypto'
import { DerError, TAG, childrenOf, expectTag, readDer, type DerNode } from '../der/der.js'
import { CrlError, quoteInput } from './crl-error.js'
import type { ParsedCrl } from './crl.js'

interface SignatureAlgorithm {
  readonly name: string
  /** The digest for `crypto.verify`; null for Ed25519, which hashes internally. */
  readonly hash: string | null
  readonly keyType: 'rsa' | 'ec' | 'ed25519'
}

/** Signature algorithms we accept on a CRL, by OID. SHA-1 and MD5 are deliberately absent. */
const ALGORITHMS: ReadonlyMap<string, SignatureAlgorithm> = new Map([
  ['1.2.840.113549.1.1.11', { name: 'sha256WithRSAEncryption', hash: 'sha256', keyType: 'rsa' }],
  ['1.2.840.113549.1.1.12', { name: 'sha384WithRSAEncryption', hash: 'sha384', keyType: 'rsa' }],
  ['1.2.840.113549.1.1.13', { name: 'sha512WithRSAEncryption', hash: 'sha512', keyType: 'rsa' }],
  ['1.2.840.10045.4.3.2', { name: 'ecdsa-with-SHA256', hash: 'sha256', keyType: 'ec' }],
  ['1.2.840.10045.4.3.3', { name: 'ecdsa-with-SHA384', hash: 'sha384', keyType: 'ec' }],
  ['1.2.840.10045.4.3.4', { name: 'ecdsa-with-SHA512', hash: 'sha512', keyType: 'ec' }],
  ['1.3.101.112', { name: 'Ed25519', hash: null, keyType: 'ed25519' }],
] as const)

/**
 * Checks that `crl` was issued and signed by `ca`: issuer name equal to the CA subject (DER compare)
 * and a valid signature over tbsCertList under the CA public key. Throws `CrlError` otherwise.
 * Dates are not checked here: the watcher decides what a stale CRL means.
 */
export function verifyCrl(crl: ParsedCrl, ca: X509Certificate): void {
  if (!crl.issuerDer.equals(subjectDerOf(ca))) {
    throw new CrlError('wrong_issuer', `the CRL was issued by another CA than "${ca.subject.replace(/\n/g, ', ')}"`)
  }
  const alg = ALGORITHMS.get(crl.signatureAlgorithmOid)
  if (alg === undefined) {
    throw new CrlError('unsupported', `unsupported CRL signature algorithm ${quoteInput(crl.signatureAlgorithmOid)}`)
  }
  const keyType = ca.publicKey.asymmetricKeyType
  if (keyType !== alg.keyType) {
    throw new CrlError('bad_signature', `the CRL is signed with ${alg.name} but the CA key is ${keyType ?? 'unknown'}`)
  }
  let ok: boolean
  try {
    ok = verify(alg.hash, crl.tbsDer, ca.publicKey, crl.signature)
  } catch {
    ok = false // a signature that is not even well-formed for the key is simply not valid
  }
  if (!ok) throw new CrlError('bad_signature', 'the CRL signature does not verify under the CA key')
}

/** The DER of a certificate's subject Name, read from the raw certificate. */
export function subjectDerOf(cert: X509Certificate): Buffer {
  try {
    const certFields = childrenOf(expectTag(readDer(cert.raw), TAG.SEQUENCE, 'Certificate'))
    const tbs = childrenOf(expectTag(certFields[0], TAG.SEQUENCE, 'tbsCertificate'))
    // tbsCertificate: [0] version (optional), serial, signature, issuer, validity, subject, ...
    const start = tbs[0]?.tag === TAG.CONTEXT_0 ? 1 : 0
    return expectTag(tbs[start + 4] as DerNode | undefined, TAG.SEQUENCE, 'subject').raw
  } catch (err) {
    if (err instanceof DerError) throw new CrlError('malformed', `cannot read the CA certificate: ${err.message}`)
    throw err
  }
}
