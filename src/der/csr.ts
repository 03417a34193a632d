/**
 * PKCS#10 certificate signing requests (RFC 2986): read and verified wherever one arrives (the CA's
 * sign-csr and signer, the controller's enrollment listener), and built on a node that makes its key in
 * memory. The self-signature is checked with Node's crypto (OpenSSL), never with node-forge's verifier;
 * only the CN and the public key are taken from a CSR: role and extensions come from the CA.
 */
import { createHash, createPublicKey, sign, verify, type KeyObject } from 'node:crypto'
import { childrenOf, decodeOid, DerError, readDer, TAG, type DerNode } from './der.js'
import { contextConstructed, objectId, sequence, set, smallInteger, utf8String, bitString } from './der-write.js'

/** Signature algorithms accepted on a CSR: the key type they need and the hash they use. */
const SIGNATURE_ALGORITHMS: Readonly<Record<string, { readonly keyType: 'rsa' | 'ec'; readonly hash: string }>> = {
  '1.2.840.113549.1.1.11': { keyType: 'rsa', hash: 'sha256' }, // sha256WithRSAEncryption
  '1.2.840.113549.1.1.12': { keyType: 'rsa', hash: 'sha384' },
  '1.2.840.113549.1.1.13': { keyType: 'rsa', hash: 'sha512' },
  '1.2.840.10045.4.3.2': { keyType: 'ec', hash: 'sha256' }, // ecdsa-with-SHA256
  '1.2.840.10045.4.3.3': { keyType: 'ec', hash: 'sha384' },
}
const ECDSA_WITH_SHA256 = '1.2.840.10045.4.3.2'
const OID_CN = '2.5.4.3'
const STRING_TAGS = new Set([0x0c, 0x13, 0x16]) // UTF8String, PrintableString, IA5String
const MIN_RSA_BITS = 2048
const EC_CURVES = new Set(['prime256v1', 'secp384r1']) // P-256, P-384 as OpenSSL names them
/** What a CSR's key may be, in the words of every refusal. */
export const ACCEPTED_CSR_KEYS = `RSA keys of ${MIN_RSA_BITS} bits or more and EC keys on P-256 or P-384`
const PEM = /-----BEGIN (?:NEW )?CERTIFICATE REQUEST-----([A-Za-z0-9+/=\s]+)-----END (?:NEW )?CERTIFICATE REQUEST-----/

/** A CSR that cannot be used; the message says why (for a refusal's answer, never with key material). */
export class CsrError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'CsrError'
  }
}

/** What is taken from a verified CSR. */
export interface VerifiedCsr {
  /** The subject's single CN, as written (the caller applies its name rule). */
  readonly name: string
  /** The CSR's public key as SubjectPublicKeyInfo DER (re-exported by node:crypto). */
  readonly spkiDer: Buffer
  readonly keyType: 'rsa' | 'ec'
  /** e.g. "RSA 2048" or "EC P-256". */
  readonly keyDescription: string
  /** The whole request's DER (what an enrollment proof covers). */
  readonly der: Buffer
  /** SHA-256 of `der`, hex: the same CSR sent again is the same request. */
  readonly fingerprint: string
}

/** The DER inside the first PEM CSR block (text around it, as `openssl req -text` writes, is ignored). */
export function csrDer(text: string): Buffer {
  const match = PEM.exec(text)
  if (match === null) throw new CsrError('not a PEM certificate signing request (no "BEGIN CERTIFICATE REQUEST" block)')
  return Buffer.from(match[1]!.replace(/\s+/g, ''), 'base64')
}

/** The single CN of a DER Name; refuses zero or several CNs and non-string values. */
function commonName(subject: DerNode): string {
  const cns: string[] = []
  for (const rdn of childrenOf(subject)) {
    for (const attr of childrenOf(rdn)) {
      const [type, value] = childrenOf(attr)
      if (type === undefined || decodeOid(type) !== OID_CN) continue
      if (value === undefined || !STRING_TAGS.has(value.tag)) throw new CsrError('the CSR subject CN is not a plain string')
      cns.push(value.content.toString('utf8'))
    }
  }
  if (cns.length !== 1) throw new CsrError(`the CSR subject must have exactly one CN (it has ${cns.length})`)
  return cns[0]!
}

/** Reads the CSR's key and refuses any but RSA >= 2048 and EC P-256/P-384 (named curves). */
function checkKey(spki: DerNode, who: string): { key: KeyObject; keyType: 'rsa' | 'ec'; keyDescription: string } {
  let key: KeyObject
  try {
    key = createPublicKey({ key: spki.raw, format: 'der', type: 'spki' })
  } catch {
    throw new CsrError('the CSR public key cannot be read')
  }
  if (key.asymmetricKeyType === 'rsa') {
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0
    if (bits < MIN_RSA_BITS) throw new CsrError(`the CSR's RSA key has ${bits} bits; at least ${MIN_RSA_BITS} are required`)
    return { key, keyType: 'rsa', keyDescription: `RSA ${bits}` }
  }
  if (key.asymmetricKeyType === 'ec') {
    const curve = key.asymmetricKeyDetails?.namedCurve ?? 'explicit parameters'
    if (!EC_CURVES.has(curve)) throw new CsrError(`the CSR's EC key is on ${curve}; ${who} accepts ${ACCEPTED_CSR_KEYS}`)
    return { key, keyType: 'ec', keyDescription: curve === 'prime256v1' ? 'EC P-256' : 'EC P-384' }
  }
  throw new CsrError(`${who} accepts ${ACCEPTED_CSR_KEYS} (this CSR has a ${key.asymmetricKeyType ?? 'unknown'} key)`)
}

/** Checks the CSR's self-signature with node:crypto; an algorithm that does not fit the key is refused. */
function checkSignature(info: DerNode, algorithm: DerNode, signature: DerNode, key: { key: KeyObject; keyType: 'rsa' | 'ec' }): void {
  const alg = SIGNATURE_ALGORITHMS[decodeOid(childrenOf(algorithm)[0] ?? algorithm)]
  if (alg === undefined) {
    throw new CsrError('the CSR is signed with an unsupported algorithm (use sha256WithRSAEncryption, ecdsa-with-SHA256 or stronger)')
  }
  if (alg.keyType !== key.keyType) throw new CsrError(`the CSR's signature algorithm does not fit its ${key.keyType.toUpperCase()} key`)
  let valid = false
  try {
    // An ECDSA signature in a CSR is the DER ECDSA-Sig-Value, node:crypto's default encoding.
    valid = signature.content[0] === 0 && verify(alg.hash, info.raw, key.key, signature.content.subarray(1))
  } catch {
    valid = false
  }
  if (!valid) throw new CsrError("the CSR's signature does not verify (the request was altered or not signed by its own key)")
}

/**
 * Parses a PEM CSR and verifies its self-signature and key. `who` names the party in a refusal of the key
 * type ("sign-csr accepts ..."). The name rule is the caller's: the CN comes back as written.
 */
export function readCsr(text: string, who: string): VerifiedCsr {
  const der = csrDer(text)
  let parts: DerNode[]
  let info: DerNode[]
  try {
    const outer = readDer(der) // exactly one value: trailing bytes are refused
    if (outer.tag !== TAG.SEQUENCE) throw new DerError('not a DER SEQUENCE')
    parts = childrenOf(outer)
    info = parts[0] === undefined ? [] : childrenOf(parts[0])
  } catch {
    throw new CsrError('not a valid certificate signing request (its DER does not parse)')
  }
  const [infoEl, algEl, sigEl] = parts
  const [, subject, spki] = info
  if (infoEl === undefined || algEl === undefined || sigEl === undefined || sigEl.tag !== TAG.BIT_STRING || subject === undefined || spki === undefined || algEl.tag !== TAG.SEQUENCE) {
    throw new CsrError('not a valid certificate signing request (unexpected structure)')
  }
  try {
    const key = checkKey(spki, who)
    checkSignature(infoEl, algEl, sigEl, key)
    const name = commonName(subject)
    return {
      name,
      spkiDer: key.key.export({ type: 'spki', format: 'der' }),
      keyType: key.keyType,
      keyDescription: key.keyDescription,
      der,
      fingerprint: createHash('sha256').update(der).digest('hex'),
    }
  } catch (err) {
    if (err instanceof DerError) throw new CsrError(`not a valid certificate signing request (${err.message})`)
    throw err
  }
}

/** A PEM CSR for `name` signed by an EC P-256 key (the node's key, made in memory at boot). */
export function buildCsr(name: string, privateKey: KeyObject): string {
  if (privateKey.asymmetricKeyType !== 'ec' || privateKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new CsrError('buildCsr signs with an EC P-256 key')
  }
  const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' })
  const subject = sequence(set(sequence(objectId(OID_CN), utf8String(name))))
  const info = sequence(smallInteger(0), subject, spki, contextConstructed(0))
  const signature = sign('sha256', info, privateKey) // DER ECDSA-Sig-Value
  const der = sequence(info, sequence(objectId(ECDSA_WITH_SHA256)), bitString(signature))
  const body = der.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')
  return `-----BEGIN CERTIFICATE REQUEST-----\n${body}\n-----END CERTIFICATE REQUEST-----\n`
}
