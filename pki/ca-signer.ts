/**
 * The CA's signatures, made by node:crypto (OpenSSL) over DER bytes that node-forge assembled: forge
 * builds structures only, its own signing code has no role. Used for certificates and CRLs alike.
 */
import { sign } from 'node:crypto'
import type { KeyObject } from 'node:crypto'
import forge from 'node-forge'
import { PkiError } from './errors.js'

const { asn1 } = forge
const U = asn1.Class.UNIVERSAL
const T = asn1.Type

/** sha256WithRSAEncryption (RFC 4055); the CA key is RSA 3072. */
const SHA256_WITH_RSA = '1.2.840.113549.1.1.11'

/** Signs TBS structures for the CA. */
export interface CaSigner {
  /** OID of the signature algorithm, as forge wants it in `siginfo.algorithmOid`. */
  readonly algorithmOid: string
  /** The AlgorithmIdentifier that goes both inside the TBS and beside the signature. */
  algorithmIdentifier(): forge.asn1.Asn1
  /** The raw signature over `tbsDer`, made on libuv's thread pool (a batch signs on every core). */
  sign(tbsDer: Buffer): Promise<Buffer>
}

/** A signer over the CA's private key (RSA only: `init` makes an RSA 3072 CA). */
export function caSigner(privateKey: KeyObject): CaSigner {
  if (privateKey.type !== 'private' || privateKey.asymmetricKeyType !== 'rsa') {
    throw new PkiError(`the CA key is ${privateKey.asymmetricKeyType ?? 'unknown'}; this toolkit signs with an RSA CA key`)
  }
  return {
    algorithmOid: SHA256_WITH_RSA,
    // RFC 4055: the parameters of the RSA PKCS#1 v1.5 algorithms are NULL.
    algorithmIdentifier: () =>
      asn1.create(U, T.SEQUENCE, true, [asn1.create(U, T.OID, false, asn1.oidToDer(SHA256_WITH_RSA).getBytes()), asn1.create(U, T.NULL, false, '')]),
    sign: (tbsDer) =>
      new Promise((resolve, reject) => {
        sign('sha256', tbsDer, privateKey, (err, signature) => (err === null ? resolve(signature) : reject(err)))
      }),
  }
}

/** DER bytes of a forge ASN.1 value. */
export function derOf(value: forge.asn1.Asn1): Buffer {
  return Buffer.from(asn1.toDer(value).getBytes(), 'binary')
}

/** Signs `tbs` and returns the DER of `SEQUENCE { tbs, signatureAlgorithm, signatureValue }` (certificate or CRL). */
export async function signStructure(tbs: forge.asn1.Asn1, signer: CaSigner): Promise<Buffer> {
  const tbsDer = derOf(tbs)
  const signature = await signer.sign(tbsDer)
  // forge's DER encoder is deterministic: `tbs` encodes again to exactly the bytes just signed.
  const signed = asn1.create(U, T.SEQUENCE, true, [
    tbs,
    signer.algorithmIdentifier(),
    asn1.create(U, T.BITSTRING, false, `\0${signature.toString('binary')}`), // no unused bits
  ])
  return derOf(signed)
}

/** PEM text with `\n` line ends (forge writes `\r\n`). */
export function toPem(type: 'CERTIFICATE' | 'X509 CRL', der: Buffer): string {
  return forge.pem.encode({ type, body: der.toString('binary') }).replaceAll('\r\n', '\n')
}
