/** The PKI index: every certificate issued or revoked, the CRL number, and a history of commands. */
import { readFile } from 'node:fs/promises'
import { z } from 'zod'
import { writeFileAtomic } from './atomic-write.js'
import { PKI_FILES, pkiPath } from './layout.js'
import { PkiError } from './errors.js'

const isoDate = z.iso.datetime({ offset: true })
const hexSerial = z.string().regex(/^[0-9a-f]+$/)

/** Roles a certificate of this PKI can have; node and operator are the client roles of SPEC "Identity". */
export const certRoleSchema = z.enum(['ca', 'server', 'node', 'operator', 'signer'])
export type CertRole = z.infer<typeof certRoleSchema>

/** Client roles an operator may issue (`--role`). */
export const CLIENT_ROLES = ['node', 'operator', 'signer'] as const
export type ClientRole = (typeof CLIENT_ROLES)[number]

const certRecordSchema = z.strictObject({
  serial: hexSerial,
  name: z.string().min(1),
  role: certRoleSchema,
  not_before: isoDate,
  not_after: isoDate,
  command: z.string(),
  issued_at: isoDate,
  revoked_at: isoDate.optional(),
  reason: z.string().optional(),
  /** Serials of the certificates of the same name this one replaced (`--replace`); they stay valid until revoked. */
  replaces: z.array(hexSerial).optional(),
  /** The enrollment or renewal request this certificate answered (the signer): the same request judged again is not a re-enrollment. */
  request_id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/).optional(),
})
export type CertRecord = z.infer<typeof certRecordSchema>

const historySchema = z.strictObject({
  at: isoDate,
  command: z.string(),
  detail: z.string(),
})

/** zod schema of index.json, used on every read. */
export const pkiIndexSchema = z.strictObject({
  format: z.literal('pxe-pki-index'),
  version: z.literal(1),
  created_at: isoDate,
  crl_number: z.number().int().nonnegative(),
  certs: z.array(certRecordSchema),
  history: z.array(historySchema),
})
export type PkiIndex = z.infer<typeof pkiIndexSchema>

/** A fresh, empty index. */
export function emptyIndex(now: Date): PkiIndex {
  return { format: 'pxe-pki-index', version: 1, created_at: now.toISOString(), crl_number: 0, certs: [], history: [] }
}

/** Reads and validates `<dir>/index.json`; a missing or foreign file is a clear PkiError. */
export async function readIndex(dir: string): Promise<PkiIndex> {
  const path = pkiPath(dir, PKI_FILES.index)
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new PkiError(`${dir} is not a PKI directory (no ${PKI_FILES.index}); create one with "pxe-pki init --dir ${dir}"`)
    }
    throw err
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    throw new PkiError(`${path} is not valid JSON; the PKI index is damaged`)
  }
  const parsed = pkiIndexSchema.safeParse(json)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    const where = issue === undefined ? '' : ` (at "${issue.path.join('.')}": ${issue.message})`
    throw new PkiError(`${path} is not a pxe-pki index${where}`)
  }
  return parsed.data
}

/** Writes the index atomically (temp file, fsync, rename, fsync of the directory). */
export async function writeIndex(dir: string, index: PkiIndex): Promise<void> {
  await writeFileAtomic(pkiPath(dir, PKI_FILES.index), `${JSON.stringify(index, null, 2)}\n`, 0o644)
}

/** Returns a copy of `index` with one more history line. */
export function withHistory(index: PkiIndex, at: Date, command: string, detail: string): PkiIndex {
  return { ...index, history: [...index.history, { at: at.toISOString(), command, detail }] }
}
