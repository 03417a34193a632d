/** `server-cert`, `issue` and `sign-csr`: leaf certificates signed by the CA and recorded in the index. */
import { mkdtemp, rename, rm, readFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import type forge from 'node-forge'
import { loadCa } from './ca.js'
import type { LoadedCa } from './ca.js'
import { addDays, buildCertificate, clientExtensions, serverExtensions, wholeSecond } from './cert-builder.js'
import type { SubjectAttr } from './cert-builder.js'
import { verifyCsr } from './csr.js'
import { checkKeyBits, generateRsaKeyPair, DEFAULT_LEAF_KEY_BITS } from './keys.js'
import { withHistory, writeIndex } from './index-file.js'
import type { CertRecord, CertRole, ClientRole, PkiIndex } from './index-file.js'
import { withPki } from './pki-dir.js'
import { ensurePrivateDir, fsyncDir, pathExists, writeFileAtomic } from './atomic-write.js'
import { BUNDLE_FILES, PKI_FILES, pkiPath } from './layout.js'
import { newSerial } from './serial.js'
import { checkDays, checkDnsName, checkIp, checkName, checkRole } from './validate.js'
import { PkiError, UsageError } from './errors.js'

/** Default lifetime of leaf certificates (node, operator, server). */
export const DEFAULT_LEAF_DAYS = 90

interface LeafRequest {
  readonly name: string
  readonly role: CertRole
  readonly subject: readonly SubjectAttr[]
  readonly publicKey: forge.pki.rsa.PublicKey
  readonly extensions: readonly object[]
  readonly days: number
  readonly notBefore: Date
  readonly command: string
  readonly now: Date
}

/** Signs one leaf with the CA; refuses a lifetime that would outlive the CA. */
function signLeaf(ca: LoadedCa, req: LeafRequest): { certPem: string; record: CertRecord } {
  const serial = newSerial()
  const notBefore = wholeSecond(req.notBefore)
  const notAfter = addDays(notBefore, req.days)
  if (notAfter > ca.cert.validity.notAfter) {
    throw new UsageError(`a ${req.days}-day certificate would outlive the CA (valid until ${ca.cert.validity.notAfter.toISOString()})`)
  }
  const certPem = buildCertificate({ serial, subject: req.subject, publicKey: req.publicKey, notBefore, notAfter, extensions: req.extensions }, ca)
  const record: CertRecord = {
    serial,
    name: req.name,
    role: req.role,
    not_before: notBefore.toISOString(),
    not_after: notAfter.toISOString(),
    command: req.command,
    issued_at: req.now.toISOString(),
  }
  return { certPem, record }
}

function withCert(index: PkiIndex, record: CertRecord, detail: string, now: Date): PkiIndex {
  return withHistory({ ...index, certs: [...index.certs, record] }, now, record.command, detail)
}

/** Options of issueServerCert. */
export interface ServerCertOptions {
  readonly dns: string[]
  readonly ip: string[]
  readonly days?: number
  readonly keyBits?: number
  readonly now?: Date
}

/** `server-cert`: (re)issues the controller's TLS certificate (serverAuth + SANs) as server.pem / server-key.pem. */
export async function issueServerCert(dir: string, opts: ServerCertOptions): Promise<{ serial: string }> {
  const dns = opts.dns.map(checkDnsName)
  const ip = opts.ip.map(checkIp)
  if (dns.length + ip.length === 0) throw new UsageError('server-cert needs at least one --dns name or --ip address')
  const days = checkDays(opts.days ?? DEFAULT_LEAF_DAYS, '--days')
  const keyBits = checkKeyBits(opts.keyBits ?? DEFAULT_LEAF_KEY_BITS)
  const now = opts.now ?? new Date()
  const name = dns[0] ?? ip[0]!
  return withPki(dir, async (index) => {
    const ca = await loadCa(dir)
    const keys = generateRsaKeyPair(keyBits)
    const { certPem, record } = signLeaf(ca, {
      name, role: 'server', subject: [{ shortName: 'CN', value: name }], publicKey: keys.publicKey,
      extensions: serverExtensions(dns, ip), days, notBefore: now, command: 'server-cert', now,
    })
    await writeFileAtomic(pkiPath(dir, PKI_FILES.serverKey), keys.privateKeyPem, 0o600)
    await writeFileAtomic(pkiPath(dir, PKI_FILES.serverCert), certPem)
    await writeIndex(dir, withCert(index, record, `server ${record.serial} dns=${dns.join(',')} ip=${ip.join(',')}`, now))
    return { serial: record.serial }
  })
}

/** Options of issueBundle. */
export interface BundleOptions {
  readonly days?: number
  readonly keyBits?: number
  readonly outDir?: string
  readonly notBefore?: Date
  readonly now?: Date
}

/** `issue`: a new key and certificate for `name`, written as the bundle folder `<outDir>/<name>/`. */
export async function issueBundle(dir: string, name: string, role: ClientRole, opts: BundleOptions = {}): Promise<{ bundleDir: string; serial: string }> {
  checkName(name)
  checkRole(role)
  const days = checkDays(opts.days ?? DEFAULT_LEAF_DAYS, '--days')
  const keyBits = checkKeyBits(opts.keyBits ?? DEFAULT_LEAF_KEY_BITS)
  const now = opts.now ?? new Date()
  const parent = resolve(opts.outDir ?? pkiPath(dir, PKI_FILES.bundles))
  const bundleDir = join(parent, name)
  return withPki(dir, async (index) => {
    if (await pathExists(bundleDir)) throw new PkiError(`bundle ${bundleDir} already exists; issue refuses to overwrite it`)
    const ca = await loadCa(dir)
    const jwks = await readFile(pkiPath(dir, PKI_FILES.planJwks), 'utf8')
    const keys = generateRsaKeyPair(keyBits)
    const { certPem, record } = signLeaf(ca, {
      name, role, subject: [{ shortName: 'CN', value: name }, { shortName: 'OU', value: role }], publicKey: keys.publicKey,
      extensions: clientExtensions(), days, notBefore: opts.notBefore ?? now, command: 'issue', now,
    })
    await ensurePrivateDir(parent)
    await writeBundle(parent, bundleDir, { key: keys.privateKeyPem, cert: certPem, ca: ca.certPem, jwks })
    try {
      await writeIndex(dir, withCert(index, record, `${role} "${name}" serial ${record.serial} bundle ${bundleDir}`, now))
    } catch (err) {
      await rm(bundleDir, { recursive: true, force: true })
      throw err
    }
    return { bundleDir, serial: record.serial }
  })
}

/** Writes the bundle in a temp folder beside its target, then renames it into place in one step. */
async function writeBundle(parent: string, bundleDir: string, files: { key: string; cert: string; ca: string; jwks: string }): Promise<void> {
  const tmp = await mkdtemp(join(parent, '.bundle-tmp-'))
  try {
    await ensurePrivateDir(tmp)
    await writeFileAtomic(join(tmp, BUNDLE_FILES.key), files.key, 0o600)
    await writeFileAtomic(join(tmp, BUNDLE_FILES.cert), files.cert)
    await writeFileAtomic(join(tmp, BUNDLE_FILES.ca), files.ca)
    await writeFileAtomic(join(tmp, BUNDLE_FILES.planJwks), files.jwks)
    await rename(tmp, bundleDir)
    await fsyncDir(parent)
  } catch (err) {
    await rm(tmp, { recursive: true, force: true })
    throw err
  }
}

/** Options of signCsr. */
export interface SignCsrOptions {
  readonly days?: number
  /** Also write the certificate to this file (refused if it exists). */
  readonly out?: string
  readonly now?: Date
}

/** `sign-csr`: verifies the CSR (Node crypto), takes only its CN and key, and signs with the role given. */
export async function signCsr(dir: string, csrPem: string, role: ClientRole, opts: SignCsrOptions = {}): Promise<{ certPem: string; serial: string }> {
  checkRole(role)
  const days = checkDays(opts.days ?? DEFAULT_LEAF_DAYS, '--days')
  const now = opts.now ?? new Date()
  const out = opts.out === undefined ? undefined : resolve(opts.out)
  return withPki(dir, async (index) => {
    const csr = verifyCsr(csrPem)
    if (out !== undefined && (await pathExists(out))) throw new PkiError(`${out} already exists; sign-csr refuses to overwrite it`)
    const ca = await loadCa(dir)
    const { certPem, record } = signLeaf(ca, {
      name: csr.name, role, subject: [{ shortName: 'CN', value: csr.name }, { shortName: 'OU', value: role }], publicKey: csr.publicKey,
      extensions: clientExtensions(), days, notBefore: now, command: 'sign-csr', now,
    })
    if (out !== undefined) await writeFileAtomic(out, certPem)
    try {
      await writeIndex(dir, withCert(index, record, `${role} "${csr.name}" serial ${record.serial} from a CSR`, now))
    } catch (err) {
      if (out !== undefined) await rm(out, { force: true })
      throw err
    }
    return { certPem, serial: record.serial }
  })
}
