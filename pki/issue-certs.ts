/**
 * `server-cert` and `sign-csr`: leaf certificates signed by the CA and recorded in the index (`issue`
 * lives in bundle-issue.ts). The index is written before any certificate reaches a file or stdout.
 */
import { rm } from 'node:fs/promises'
import { resolve } from 'node:path'
import { loadCa } from './ca.js'
import { clientExtensions, serverExtensions } from './cert-builder.js'
import { verifyCsr } from './csr.js'
import { checkKeySpec, describeKeySpec, generateKeyPairInPool } from './keys.js'
import type { KeyType } from './keys.js'
import { checkReplace, clientSubject, DEFAULT_LEAF_DAYS, replacementNote, signLeaf, withCerts } from './leaf.js'
import { writeIndex } from './index-file.js'
import type { ClientRole } from './index-file.js'
import { withPki } from './pki-dir.js'
import { pathExists, writeFileAtomic } from './atomic-write.js'
import { PKI_FILES, pkiPath } from './layout.js'
import { checkDays, checkDnsName, checkIp, checkRole } from './validate.js'
import { PkiError, UsageError } from './errors.js'

export { issueBundle, issueBundles } from './bundle-issue.js'
export type { BundleOptions, BatchOptions, IssuedBundle } from './bundle-issue.js'
export { DEFAULT_LEAF_DAYS } from './leaf.js'

/** Options of issueServerCert. */
export interface ServerCertOptions {
  readonly dns: string[]
  readonly ip: string[]
  readonly days?: number
  /** `rsa` (default) or `ec` (P-256). */
  readonly keyType?: KeyType
  readonly keyBits?: number
  readonly now?: Date
}

/** `server-cert`: (re)issues the controller's TLS certificate (serverAuth + SANs) as server.pem / server-key.pem. */
export async function issueServerCert(dir: string, opts: ServerCertOptions): Promise<{ serial: string }> {
  const dns = opts.dns.map(checkDnsName)
  const ip = opts.ip.map(checkIp)
  if (dns.length + ip.length === 0) throw new UsageError('server-cert needs at least one --dns name or --ip address')
  const days = checkDays(opts.days ?? DEFAULT_LEAF_DAYS, '--days')
  const keySpec = checkKeySpec(opts.keyType, opts.keyBits)
  const now = opts.now ?? new Date()
  const name = dns[0] ?? ip[0]!
  return withPki(dir, async (index) => {
    const ca = await loadCa(dir)
    const keys = await generateKeyPairInPool(keySpec)
    const { certPem, record } = await signLeaf(ca, {
      name, role: 'server', subject: [{ shortName: 'CN', value: name }], spkiDer: keys.spkiDer,
      extensions: serverExtensions(dns, ip, keySpec.type), days, notBefore: now, command: 'server-cert', now,
    })
    await writeIndex(dir, withCerts(index, [record], 'server-cert', `server ${record.serial} (${describeKeySpec(keySpec)}) dns=${dns.join(',')} ip=${ip.join(',')}`, now))
    await writeFileAtomic(pkiPath(dir, PKI_FILES.serverKey), keys.privateKeyPem, 0o600)
    await writeFileAtomic(pkiPath(dir, PKI_FILES.serverCert), certPem)
    return { serial: record.serial }
  })
}

/** Options of signCsr. */
export interface SignCsrOptions {
  readonly days?: number
  /** Also write the certificate to this file (refused if it exists). */
  readonly out?: string
  readonly now?: Date
  /** Sign even if the CN holds a valid certificate (a planned rotation). */
  readonly replace?: boolean
}

/** What signCsr made; `note` says what a replacement leaves to do ('' when it replaces nothing). */
export interface SignedCsr {
  readonly certPem: string
  readonly serial: string
  readonly replaces: string[]
  readonly note: string
}

/** `sign-csr`: verifies the CSR (Node crypto), takes only its CN and key, and signs with the role given. */
export async function signCsr(dir: string, csrPem: string, role: ClientRole, opts: SignCsrOptions = {}): Promise<SignedCsr> {
  checkRole(role)
  const days = checkDays(opts.days ?? DEFAULT_LEAF_DAYS, '--days')
  const now = opts.now ?? new Date()
  const out = opts.out === undefined ? undefined : resolve(opts.out)
  return withPki(dir, async (index) => {
    const csr = verifyCsr(csrPem)
    if (out !== undefined && (await pathExists(out))) throw new PkiError(`${out} already exists; sign-csr refuses to overwrite it`)
    const replaces = checkReplace(index, csr.name, now, opts.replace === true)
    const ca = await loadCa(dir)
    const { certPem, record } = await signLeaf(ca, {
      name: csr.name, role, subject: clientSubject(csr.name, role), spkiDer: csr.spkiDer,
      extensions: clientExtensions(csr.keyType), days, notBefore: now, command: 'sign-csr', now, replaces,
    })
    const replaced = replaces.length > 0 ? `; replaces ${replaces.join(',')}` : ''
    await writeIndex(dir, withCerts(index, [record], 'sign-csr', `${role} "${csr.name}" serial ${record.serial} (${csr.keyDescription}) from a CSR${replaced}`, now))
    if (out !== undefined) {
      try {
        await writeFileAtomic(out, certPem)
      } catch (err) {
        await writeIndex(dir, index) // the certificate reached no file: it was not issued
        await rm(out, { force: true })
        throw err
      }
    }
    return { certPem, serial: record.serial, replaces, note: replacementNote(replaces) }
  })
}
