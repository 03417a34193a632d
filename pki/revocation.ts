/** `revoke`, `crl` and `list`: revocation state in the index, and the CRL that publishes it. */
import { constants } from 'node:fs'
import { access, stat } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import { loadCa } from './ca.js'
import { buildCrl, DEFAULT_CRL_DAYS, parseReason } from './crl.js'
import type { CrlEntry, RevocationReason } from './crl.js'
import { addDays, wholeSecond } from './cert-builder.js'
import { withHistory, writeIndex } from './index-file.js'
import type { CertRecord, CertRole, PkiIndex } from './index-file.js'
import { readPki, withPki } from './pki-dir.js'
import { writeFileAtomic } from './atomic-write.js'
import { PKI_FILES, pkiPath } from './layout.js'
import { normalizeSerial } from './serial.js'
import { checkDays, checkName } from './validate.js'
import { PkiError } from './errors.js'

/** What `revoke` acts on: every unexpired certificate of a name, or one serial. */
export type RevokeTarget = { readonly name: string } | { readonly serial: string }

/** Options of revoke. */
export interface RevokeOptions {
  readonly reason?: string
  readonly crlDays?: number
  /** Also write the new CRL here (atomically), e.g. the copy to push with `pxe-ctl crl push`. */
  readonly out?: string
  readonly now?: Date
}

/** Options of writeCrl. */
export interface CrlOptions {
  readonly out?: string
  readonly crlDays?: number
  readonly now?: Date
}

/** One line of `list --json` (SPEC "Operator PKI CLI"). */
export interface CertEntry {
  readonly serial: string
  readonly name: string
  readonly role: CertRole
  readonly not_before: string
  readonly not_after: string
  readonly status: 'valid' | 'revoked' | 'expired'
}

function stripZeros(serial: string): string {
  return serial.replace(/^0+/, '') || '0'
}

/** The records `target` designates, or a PkiError that says why there are none. */
function selectTargets(index: PkiIndex, target: RevokeTarget, now: Date): CertRecord[] {
  if ('serial' in target) {
    const serial = normalizeSerial(target.serial)
    const record = index.certs.find((c) => stripZeros(c.serial) === serial)
    if (record === undefined) throw new PkiError(`no certificate with serial ${serial} was issued by this PKI`)
    if (record.role === 'ca') throw new PkiError('the CA certificate cannot be revoked by its own CRL; make a new PKI instead')
    if (record.revoked_at !== undefined) throw new PkiError(`certificate ${record.serial} was already revoked at ${record.revoked_at}`)
    return [record]
  }
  const name = checkName(target.name)
  const mine = index.certs.filter((c) => c.name === name && (c.role === 'node' || c.role === 'operator'))
  const live = mine.filter((c) => c.revoked_at === undefined && new Date(c.not_after) > now)
  if (live.length === 0) {
    const why = mine.length === 0 ? 'no certificate was issued to' : 'every certificate is already revoked or expired for'
    throw new PkiError(`nothing to revoke: ${why} "${name}"`)
  }
  return live
}

/** The CRL entries of every revoked certificate in the index. */
function crlEntries(index: PkiIndex): CrlEntry[] {
  return index.certs
    .filter((c) => c.revoked_at !== undefined)
    .map((c) => ({ serial: c.serial, revokedAt: new Date(c.revoked_at!), reason: parseReason(c.reason ?? 'unspecified') }))
}

/**
 * Checks that `--out FILE` can be written before anything is committed: a revocation recorded in the
 * index and crl.pem, followed by a failed copy, would leave the operator with "nothing to revoke" on
 * the retry and no copy to ship.
 */
async function checkOutPath(out: string): Promise<void> {
  const folder = dirname(out)
  const info = await stat(folder).catch(() => null)
  if (info === null || !info.isDirectory()) throw new PkiError(`--out ${out}: the folder ${folder} does not exist; nothing was changed`)
  if (await access(folder, constants.W_OK).then(() => false, () => true)) throw new PkiError(`--out ${out}: the folder ${folder} is not writable; nothing was changed`)
  const existing = await stat(out).catch(() => null)
  if (existing !== null && !existing.isFile()) throw new PkiError(`--out ${out}: exists and is not a file; nothing was changed`)
}

/** Signs the next CRL for `index` (whose crl_number is already the new one) and writes crl.pem (and `out`). */
export async function publishCrl(dir: string, index: PkiIndex, now: Date, crlDays: number, out?: string): Promise<void> {
  const ca = await loadCa(dir)
  const thisUpdate = wholeSecond(now)
  const pem = await buildCrl(ca, { crlNumber: index.crl_number, thisUpdate, nextUpdate: addDays(thisUpdate, crlDays), entries: crlEntries(index) })
  // The index goes first: a CRL number is never reused, even if writing crl.pem fails afterwards.
  await writeIndex(dir, index)
  await writeFileAtomic(pkiPath(dir, PKI_FILES.crl), pem)
  if (out !== undefined) await writeFileAtomic(out, pem)
}

/** `revoke`: marks the target certificates revoked and rewrites crl.pem (and `out`) at once. */
export async function revoke(dir: string, target: RevokeTarget, opts: RevokeOptions = {}): Promise<{ revoked: string[]; crlNumber: number }> {
  const reason: RevocationReason = parseReason(opts.reason ?? 'unspecified')
  const crlDays = checkDays(opts.crlDays ?? DEFAULT_CRL_DAYS, '--crl-days')
  if ('name' in target) checkName(target.name)
  else normalizeSerial(target.serial)
  const now = opts.now ?? new Date()
  const out = opts.out === undefined ? undefined : resolve(opts.out)
  if (out !== undefined) await checkOutPath(out)
  return withPki(dir, async (index) => {
    const chosen = new Set(selectTargets(index, target, now).map((c) => c.serial))
    const at = wholeSecond(now).toISOString()
    const certs = index.certs.map((c) => (chosen.has(c.serial) ? { ...c, revoked_at: at, reason } : c))
    const crlNumber = index.crl_number + 1
    const revoked = [...chosen]
    const next = withHistory({ ...index, certs, crl_number: crlNumber }, now, 'revoke', `${revoked.join(',')} reason ${reason}, CRL ${crlNumber}${out === undefined ? '' : ` also to ${out}`}`)
    await publishCrl(dir, next, now, crlDays, out)
    return { revoked, crlNumber }
  })
}

/** `crl`: writes a fresh CRL (next CRL number) to crl.pem and, if given, to `out`. */
export async function writeCrl(dir: string, opts: CrlOptions = {}): Promise<{ crlNumber: number }> {
  const crlDays = checkDays(opts.crlDays ?? DEFAULT_CRL_DAYS, '--crl-days')
  const now = opts.now ?? new Date()
  const out = opts.out === undefined ? undefined : resolve(opts.out)
  if (out !== undefined) await checkOutPath(out)
  return withPki(dir, async (index) => {
    const crlNumber = index.crl_number + 1
    const next = withHistory({ ...index, crl_number: crlNumber }, now, 'crl', `CRL ${crlNumber}${out === undefined ? '' : ` also to ${out}`}`)
    await publishCrl(dir, next, now, crlDays, out)
    return { crlNumber }
  })
}

/** `list`: every certificate in the index with its status at `now` (reads only; takes no lock). */
export async function listCerts(dir: string, now: Date = new Date()): Promise<CertEntry[]> {
  const index = await readPki(dir)
  return index.certs.map((c) => ({
    serial: c.serial,
    name: c.name,
    role: c.role,
    not_before: c.not_before,
    not_after: c.not_after,
    status: c.revoked_at !== undefined ? 'revoked' : new Date(c.not_after) <= now ? 'expired' : 'valid',
  }))
}
