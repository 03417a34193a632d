/** The certificate authority: creating it once, and loading it to sign certificates and CRLs. */
import { createPrivateKey, randomBytes, X509Certificate } from 'node:crypto'
import type { KeyObject } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { buildCertificate, caExtensions, addDays, derToAsn1, wholeSecond } from './cert-builder.js'
import type { Issuer } from './cert-builder.js'
import { caSigner } from './ca-signer.js'
import { DerError, childrenOf as children, readDer } from '../src/der/der.js'
import { generateKeyPairInPool, CA_KEY_BITS } from './keys.js'
import { PKI_FILES, pkiPath } from './layout.js'
import { newSerial } from './serial.js'
import { PkiError } from './errors.js'

/** Default CA lifetime: 10 years. */
export const DEFAULT_CA_DAYS = 3650

/** A freshly made CA, still in memory. */
export interface NewCa {
  readonly certPem: string
  readonly keyPem: string
  readonly serial: string
  readonly name: string
  readonly notBefore: Date
  readonly notAfter: Date
}

/** A CA loaded from disk, ready to sign. */
export interface LoadedCa extends Issuer {
  readonly certPem: string
  readonly notAfter: Date
}

/** Makes a self-signed RSA 3072 CA; its CN carries a short random tag so two PKIs are told apart. */
export async function createCa(now: Date, days = DEFAULT_CA_DAYS): Promise<NewCa> {
  const keys = await generateKeyPairInPool({ type: 'rsa', bits: CA_KEY_BITS })
  const serial = newSerial()
  const name = `pxe-controller CA ${randomBytes(4).toString('hex')}`
  const notBefore = wholeSecond(now)
  const notAfter = addDays(notBefore, days)
  const certPem = await buildCertificate(
    { serial, subject: [{ shortName: 'CN', value: name }], spkiDer: keys.spkiDer, notBefore, notAfter, extensions: caExtensions() },
    'self',
    caSigner(createPrivateKey(keys.privateKeyPem)),
  )
  return { certPem, keyPem: keys.privateKeyPem, serial, name, notBefore, notAfter }
}

async function readPkiFile(dir: string, file: string): Promise<string> {
  try {
    return await readFile(pkiPath(dir, file), 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new PkiError(`${pkiPath(dir, file)} is missing; the PKI directory is incomplete`)
    throw err
  }
}

const OID_SUBJECT_KEY_ID = Buffer.from([0x55, 0x1d, 0x0e]) // 2.5.29.14

/** The subject Name (its exact DER) and the subject key identifier (binary string) of a certificate. */
function subjectAndKeyId(der: Buffer): { name: Buffer; keyId: string | null } {
  try {
    return readSubjectAndKeyId(der)
  } catch (err) {
    if (err instanceof DerError) throw new PkiError(`the CA certificate's DER does not parse: ${err.message}`)
    throw err
  }
}

function readSubjectAndKeyId(der: Buffer): { name: Buffer; keyId: string | null } {
  const tbs = children(children(readDer(der))[0]!)
  const first = tbs[0]?.tag === 0xa0 ? 1 : 0 // [0] version, then serial, signature, issuer, validity, subject
  const name = tbs[first + 4]
  if (name === undefined || name.tag !== 0x30) throw new PkiError('the CA certificate has no subject')
  const extensions = tbs.find((e) => e.tag === 0xa3)
  for (const ext of extensions === undefined ? [] : children(children(extensions)[0]!)) {
    const parts = children(ext)
    if (parts[0]?.content.equals(OID_SUBJECT_KEY_ID) !== true) continue
    const value = readDer(parts[parts.length - 1]!.content) // extnValue wraps exactly one OCTET STRING
    return { name: name.raw, keyId: value.content.toString('binary') }
  }
  return { name: name.raw, keyId: null }
}

/** A CA from its PEM texts (read with node:crypto and our DER reader); refuses a key that is not the certificate's own. */
export function caFromPem(certPem: string, keyPem: string, where = 'the CA'): LoadedCa {
  let privateKey: KeyObject
  try {
    privateKey = createPrivateKey(keyPem)
  } catch {
    throw new PkiError(`the key of ${where} is not a readable private key`)
  }
  let cert: X509Certificate
  let fields: { name: Buffer; keyId: string | null }
  try {
    cert = new X509Certificate(certPem)
    fields = subjectAndKeyId(cert.raw)
  } catch {
    throw new PkiError(`${where} is not a readable CA certificate`)
  }
  if (!cert.checkPrivateKey(privateKey)) throw new PkiError(`${where} does not belong to the CA key; the PKI directory is damaged`)
  return { certPem, name: derToAsn1(fields.name), notAfter: new Date(cert.validTo), signer: caSigner(privateKey), keyId: fields.keyId }
}

/** Loads `ca.pem` and `ca-key.pem`. */
export async function loadCa(dir: string): Promise<LoadedCa> {
  const certPem = await readPkiFile(dir, PKI_FILES.caCert)
  const keyPem = await readPkiFile(dir, PKI_FILES.caKey)
  return caFromPem(certPem, keyPem, pkiPath(dir, PKI_FILES.caCert))
}
