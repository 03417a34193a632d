/** The certificate authority: creating it once, and loading it to sign certificates and CRLs. */
import { randomBytes } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import forge from 'node-forge'
import { buildCertificate, caExtensions, addDays, wholeSecond } from './cert-builder.js'
import type { Issuer } from './cert-builder.js'
import { generateRsaKeyPair, rsaKeyPairFromPem, CA_KEY_BITS } from './keys.js'
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
  readonly cert: forge.pki.Certificate
}

/** Makes a self-signed RSA 3072 CA; its CN carries a short random tag so two PKIs are told apart. */
export function createCa(now: Date, days = DEFAULT_CA_DAYS): NewCa {
  const keys = generateRsaKeyPair(CA_KEY_BITS)
  const serial = newSerial()
  const name = `pxe-controller CA ${randomBytes(4).toString('hex')}`
  const notBefore = wholeSecond(now)
  const notAfter = addDays(notBefore, days)
  const certPem = buildCertificate(
    { serial, subject: [{ shortName: 'CN', value: name }], publicKey: keys.publicKey, notBefore, notAfter, extensions: caExtensions() },
    'self',
    keys.privateKey,
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

/** Loads `ca.pem` and `ca-key.pem` (parsing only; nothing here trusts forge's signature checks). */
export async function loadCa(dir: string): Promise<LoadedCa> {
  const certPem = await readPkiFile(dir, PKI_FILES.caCert)
  const keyPem = await readPkiFile(dir, PKI_FILES.caKey)
  let cert: forge.pki.Certificate
  try {
    cert = forge.pki.certificateFromPem(certPem)
  } catch {
    throw new PkiError(`${pkiPath(dir, PKI_FILES.caCert)} is not a readable CA certificate`)
  }
  const { privateKey } = rsaKeyPairFromPem(keyPem)
  const ski = cert.getExtension('subjectKeyIdentifier') as { subjectKeyIdentifier?: string } | null
  const keyId = ski?.subjectKeyIdentifier === undefined ? null : forge.util.hexToBytes(ski.subjectKeyIdentifier)
  return { certPem, cert, subject: cert.subject.attributes, privateKey, keyId }
}
