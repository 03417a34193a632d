/**
 * PKCS#10 CSRs made on a device. The signature is checked with Node's crypto (OpenSSL), never with
 * node-forge's verifier; only the CN and the public key are taken from the CSR — role and extensions
 * come from the CA.
 */
import { createPublicKey, verify } from 'node:crypto'
import type { KeyObject } from 'node:crypto'
import forge from 'node-forge'
import { nameProblem } from '../src/core/names.js'
import { DerError, childrenOf as children, readDer, type DerNode as DerElement } from '../src/der/der.js'
import { PkiError } from './errors.js'

/** Signature algorithms accepted on a CSR: the key type they need and the hash they use. */
const SIGNATURE_ALGORITHMS: Readonly<Record<string, { readonly keyType: 'rsa' | 'ec'; readonly hash: string }>> = {
  '1.2.840.113549.1.1.11': { keyType: 'rsa', hash: 'sha256' }, // sha256WithRSAEncryption
  '1.2.840.113549.1.1.12': { keyType: 'rsa', hash: 'sha384' },
  '1.2.840.113549.1.1.13': { keyType: 'rsa', hash: 'sha512' },
  '1.2.840.10045.4.3.2': { keyType: 'ec', hash: 'sha256' }, // ecdsa-with-SHA256
  '1.2.840.10045.4.3.3': { keyType: 'ec', hash: 'sha384' },
}
const OID_CN = '2.5.4.3'
const STRING_TAGS = new Set([0x0c, 0x13, 0x16]) // UTF8String, PrintableString, IA5String
const MIN_RSA_BITS = 2048
const EC_CURVES = new Set(['prime256v1', 'secp384r1']) // P-256, P-384 as OpenSSL names them

/** What the CA takes from a verified CSR. */
export interface VerifiedCsr {
  readonly name: string
  /** The CSR's public key as SubjectPublicKeyInfo DER (re-exported by node:crypto). */
  readonly spkiDer: Buffer
  readonly keyType: 'rsa' | 'ec'
  /** e.g. "RSA 2048" or "EC P-256", for the index history. */
  readonly keyDescription: string
}

function oidOf(element: DerElement | undefined): string {
  if (element === undefined || element.tag !== 0x06) throw new PkiError('the CSR is malformed (expected an OID)')
  return forge.asn1.derToOid(element.content.toString('binary'))
}

function csrDer(text: string): Buffer {
  const match = /-----BEGIN (?:NEW )?CERTIFICATE REQUEST-----([A-Za-z0-9+/=\s]+)-----END (?:NEW )?CERTIFICATE REQUEST-----/.exec(text)
  if (match === null) throw new PkiError('the file is not a PEM certificate signing request (no "BEGIN CERTIFICATE REQUEST" block)')
  return Buffer.from(match[1]!.replace(/\s+/g, ''), 'base64')
}

/** The single CN of a DER Name; refuses zero or several CNs and non-string values. */
function commonName(subject: DerElement): string {
  const cns: string[] = []
  for (const rdn of children(subject)) {
    for (const attr of children(rdn)) {
      const [type, value] = children(attr)
      if (oidOf(type) !== OID_CN) continue
      if (value === undefined || !STRING_TAGS.has(value.tag)) throw new PkiError('the CSR subject CN is not a plain string')
      cns.push(value.content.toString('utf8'))
    }
  }
  if (cns.length !== 1) throw new PkiError(`the CSR subject must have exactly one CN (it has ${cns.length})`)
  return cns[0]!
}

const ACCEPTED_KEYS = `RSA keys of ${MIN_RSA_BITS} bits or more and EC keys on P-256 or P-384`

/** Reads the CSR's key and refuses any but RSA >= 2048 and EC P-256/P-384 (named curves). */
function checkKey(spki: DerElement): { key: KeyObject; keyType: 'rsa' | 'ec'; keyDescription: string } {
  let key: KeyObject
  try {
    key = createPublicKey({ key: spki.raw, format: 'der', type: 'spki' })
  } catch {
    throw new PkiError('the CSR public key cannot be read')
  }
  if (key.asymmetricKeyType === 'rsa') {
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0
    if (bits < MIN_RSA_BITS) throw new PkiError(`the CSR's RSA key has ${bits} bits; at least ${MIN_RSA_BITS} are required`)
    return { key, keyType: 'rsa', keyDescription: `RSA ${bits}` }
  }
  if (key.asymmetricKeyType === 'ec') {
    const curve = key.asymmetricKeyDetails?.namedCurve ?? 'explicit parameters'
    if (!EC_CURVES.has(curve)) throw new PkiError(`the CSR's EC key is on ${curve}; sign-csr accepts ${ACCEPTED_KEYS}`)
    return { key, keyType: 'ec', keyDescription: curve === 'prime256v1' ? 'EC P-256' : 'EC P-384' }
  }
  throw new PkiError(`sign-csr accepts ${ACCEPTED_KEYS} (this CSR has a ${key.asymmetricKeyType ?? 'unknown'} key)`)
}

/** Checks the CSR's self-signature with node:crypto; an algorithm that does not fit the key is refused. */
function checkSignature(info: DerElement, algorithm: DerElement, signature: DerElement, key: { key: KeyObject; keyType: 'rsa' | 'ec' }): void {
  const alg = SIGNATURE_ALGORITHMS[oidOf(children(algorithm)[0])]
  if (alg === undefined) {
    throw new PkiError('the CSR is signed with an unsupported algorithm (use sha256WithRSAEncryption, ecdsa-with-SHA256 or stronger)')
  }
  if (alg.keyType !== key.keyType) throw new PkiError(`the CSR's signature algorithm does not fit its ${key.keyType.toUpperCase()} key`)
  let valid = false
  try {
    // An ECDSA signature in a CSR is the DER ECDSA-Sig-Value, node:crypto's default encoding.
    valid = signature.content[0] === 0 && verify(alg.hash, info.raw, key.key, signature.content.subarray(1))
  } catch {
    valid = false
  }
  if (!valid) throw new PkiError("the CSR's signature does not verify (the request was altered or not signed by its own key)")
}

/** Parses a PEM CSR, verifies its self-signature with Node's crypto and checks the CN against the name rule. */
export function verifyCsr(text: string): VerifiedCsr {
  const der = csrDer(text)
  let parts: DerElement[]
  let info: DerElement[]
  try {
    const outer = readDer(der) // exactly one value: trailing bytes are refused
    if (outer.tag !== 0x30) throw new PkiError('not a DER SEQUENCE')
    parts = children(outer)
    info = parts[0] === undefined ? [] : children(parts[0])
  } catch {
    throw new PkiError('the file is not a valid certificate signing request (its DER does not parse)')
  }
  const [infoEl, algEl, sigEl] = parts
  const [, subject, spki] = info
  if (infoEl === undefined || algEl === undefined || sigEl === undefined || sigEl.tag !== 0x03 || subject === undefined || spki === undefined) {
    throw new PkiError('the file is not a valid certificate signing request (unexpected structure)')
  }
  let key: ReturnType<typeof checkKey>
  let name: string
  try {
    key = checkKey(spki)
    checkSignature(infoEl, algEl, sigEl, key)
    name = commonName(subject)
  } catch (err) {
    if (err instanceof DerError) throw new PkiError(`the file is not a valid certificate signing request (${err.message})`)
    throw err
  }
  const problem = nameProblem(name)
  if (problem !== null) throw new PkiError(`the CSR's CN is not a valid name: ${problem}`)
  return { name, spkiDer: key.key.export({ type: 'spki', format: 'der' }), keyType: key.keyType, keyDescription: key.keyDescription }
}
