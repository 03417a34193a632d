/**
 * The signer's bundle (`pxe-pki issue NAME --role signer`): key.pem, cert.pem, ca.pem. Checked before any
 * request, so that a wrong folder fails with its reason rather than a TLS alert or a 403, and checked
 * against the PKI it signs with: a bundle of another CA would post certificates every controller refuses.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto'
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { BUNDLE_FILES, PKI_FILES, pkiPath } from './layout.js'
import type { LinkIdentity } from './controller-link.js'
import { PkiError } from './errors.js'

/** A checked signer bundle. */
export interface SignerBundle extends LinkIdentity {
  readonly name: string
  readonly notAfter: Date
}

async function readBundleFile(dir: string, file: string): Promise<string> {
  try {
    return await readFile(join(dir, file), 'utf8')
  } catch (err) {
    throw new PkiError(`bundle ${dir}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
}

function certificate(pem: string, where: string): X509Certificate {
  try {
    return new X509Certificate(pem)
  } catch {
    throw new PkiError(`${where} is not a PEM certificate`)
  }
}

function subjectValue(subject: string, attr: string): string | null {
  const values = subject.split('\n').filter((l) => l.startsWith(`${attr}=`))
  return values.length === 1 ? values[0]!.slice(attr.length + 1) : null
}

/** Reads the bundle in `bundleDir` and checks it is a signer identity of the PKI in `pkiDir`. */
export async function loadSignerBundle(bundleDir: string, pkiDir: string, now = new Date()): Promise<SignerBundle> {
  const key = await readBundleFile(bundleDir, BUNDLE_FILES.key)
  const mode = (await stat(join(bundleDir, BUNDLE_FILES.key))).mode & 0o777
  if ((mode & 0o077) !== 0) throw new PkiError(`bundle ${bundleDir}: key.pem is accessible by group or others (mode ${mode.toString(8).padStart(4, '0')}); run chmod 600 on it`)
  const certPem = await readBundleFile(bundleDir, BUNDLE_FILES.cert)
  const caPem = await readBundleFile(bundleDir, BUNDLE_FILES.ca)
  const cert = certificate(certPem, `bundle ${bundleDir}: cert.pem`)
  const ca = certificate(caPem, `bundle ${bundleDir}: ca.pem`)
  const name = subjectValue(cert.subject, 'CN') ?? '?'
  const role = subjectValue(cert.subject, 'OU')
  if (role !== 'signer') {
    throw new PkiError(`bundle ${bundleDir}: cert.pem is a ${role ?? 'role-less'} certificate of ${name}, not a signer one (issue one with "pxe-pki issue NAME --role signer")`)
  }
  if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) throw new PkiError(`bundle ${bundleDir}: cert.pem was not issued by the bundle's ca.pem`)
  let pkiCa: X509Certificate
  try {
    pkiCa = new X509Certificate(await readFile(pkiPath(pkiDir, PKI_FILES.caCert)))
  } catch {
    throw new PkiError(`PKI directory ${pkiDir} has no readable ca.pem; is --dir the PKI this signer signs with?`)
  }
  if (pkiCa.fingerprint256 !== ca.fingerprint256) throw new PkiError(`bundle ${bundleDir}: its ca.pem is not the CA of ${pkiDir}; the controllers would refuse what this PKI signs`)
  let matches: boolean
  try {
    matches = cert.checkPrivateKey(createPrivateKey(key))
  } catch {
    throw new PkiError(`bundle ${bundleDir}: key.pem is not a PEM private key`)
  }
  if (!matches) throw new PkiError(`bundle ${bundleDir}: key.pem does not belong to cert.pem`)
  const notAfter = new Date(cert.validTo)
  if (now > notAfter) throw new PkiError(`bundle ${bundleDir}: the signer certificate of ${name} expired at ${notAfter.toISOString()}`)
  return { name, cert: certPem, key, ca: caPem, notAfter }
}
