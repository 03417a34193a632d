/**
 * PKCS#10 CSRs made on a device. The signature is checked with Node's crypto (OpenSSL), never with
 * node-forge's verifier; only the CN and the public key are taken from the CSR — role and extensions
 * come from the CA.
 */
import { createPublicKey, verify } from 'node:crypto'
import type { KeyObject } from 'node:crypto'
import forge from 'node-forge'
import { nameProblem } from '../src/core/names.js'
import { children, readElement } from './der.js'
import type { DerElement } from './der.js'
import { PkiError } from './errors.js'

const RSA_SIGNATURE_HASHES: Readonly<Record<string, string>> = {
  '1.2.840.113549.1.1.11': 'sha256',
  '1.2.840.113549.1.1.12': 'sha384',
  '1.2.840.113549.1.1.13': 'sha512',
}
const OID_CN = '2.5.4.3'
const STRING_TAGS = new Set([0x0c, 0x13, 0x16]) // UTF8String, PrintableString, IA5String
const MIN_RSA_BITS = 2048

/** What the CA takes from a verified CSR. */
export interface VerifiedCsr {
  readonly name: string
  readonly publicKey: forge.pki.rsa.PublicKey
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

function checkKey(spki: DerElement): KeyObject {
  let key: KeyObject
  try {
    key = createPublicKey({ key: spki.raw, format: 'der', type: 'spki' })
  } catch {
    throw new PkiError('the CSR public key cannot be read')
  }
  if (key.asymmetricKeyType !== 'rsa') {
    throw new PkiError(`sign-csr accepts RSA keys only (this CSR has a ${key.asymmetricKeyType ?? 'unknown'} key)`)
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0
  if (bits < MIN_RSA_BITS) throw new PkiError(`the CSR's RSA key has ${bits} bits; at least ${MIN_RSA_BITS} are required`)
  return key
}

/** Parses a PEM CSR, verifies its self-signature with Node's crypto and checks the CN against the name rule. */
export function verifyCsr(text: string): VerifiedCsr {
  const der = csrDer(text)
  let parts: DerElement[]
  let info: DerElement[]
  try {
    const outer = readElement(der)
    if (outer.tag !== 0x30 || outer.raw.length !== der.length) throw new PkiError('not a DER SEQUENCE')
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
  const key = checkKey(spki)
  const hash = RSA_SIGNATURE_HASHES[oidOf(children(algEl)[0])]
  if (hash === undefined) throw new PkiError('the CSR is signed with an unsupported algorithm (use sha256WithRSAEncryption or stronger)')
  const signature = sigEl.content.subarray(1)
  if (sigEl.content[0] !== 0 || !verify(hash, infoEl.raw, key, signature)) {
    throw new PkiError("the CSR's signature does not verify (the request was altered or not signed by its own key)")
  }
  const name = commonName(subject)
  const problem = nameProblem(name)
  if (problem !== null) throw new PkiError(`the CSR's CN is not a valid name: ${problem}`)
  const publicKey = forge.pki.publicKeyFromPem(key.export({ type: 'spki', format: 'pem' }).toString())
  return { name, publicKey }
}
