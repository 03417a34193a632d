/**
 * The TLS session-ticket key file, `<state_dir>/tls-ticket-keys.json`: the state files' checksummed
 * format (state-file-format.ts), written atomically (temp file created 0600, fsync, rename, directory
 * fsync) and validated with zod when read back. Unlike state.json no previous copy is kept: an old key
 * left on disk would only widen what a reader of the folder could do (SECURITY.md "Keys").
 */
import { createHash } from 'node:crypto'
import { constants } from 'node:fs'
import { mkdir, open } from 'node:fs/promises'
import { join } from 'node:path'
import { z } from 'zod'
import { removeLeftoverTemps, replaceFileAtomically } from '../state/durable-fs.js'
import { decodeStateFile, encodeStateFile } from '../state/state-file-format.js'

/** The file's name inside the state directory. */
export const TICKET_KEY_FILE = 'tls-ticket-keys.json'

/** Node's ticket keys: 16 bytes of key name, 16 of HMAC key, 16 of AES key. */
export const TICKET_KEY_BYTES = 48

const fileBodySchema = z
  .object({
    kind: z.literal('tls-ticket-keys'),
    created_at: z.iso.datetime(),
    crl_sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lower-case hex digits'),
    keys: z.string().regex(/^[A-Za-z0-9+/]{64}$/, `must be ${TICKET_KEY_BYTES} bytes in base64`),
  })
  .strict()

/** Ticket keys with what they are bound to. */
export interface TicketKeyRecord {
  readonly keys: Buffer
  /** When the keys were drawn (wall clock, ms). */
  readonly createdAt: number
  /** `crlFingerprint` of the CRL in force when they were drawn: another CRL means they are stale. */
  readonly crlSha256: string
}

/** What reading the file found: keys, no file, or why the file cannot be used (never its content). */
export type TicketKeyFileRead = { readonly record: TicketKeyRecord } | { readonly missing: true } | { readonly unusable: string }

/** The SHA-256 (hex) of a CRL's PEM, as the file records it. */
export function crlFingerprint(crlPem: string): string {
  return createHash('sha256').update(crlPem, 'utf8').digest('hex')
}

/** The file's path in `dir`. */
export function ticketKeyPath(dir: string): string {
  return join(dir, TICKET_KEY_FILE)
}

/** Reads the file without following a symbolic link; a file others may read or write is not used. */
export async function readTicketKeyFile(dir: string): Promise<TicketKeyFileRead> {
  let bytes: Buffer
  try {
    const fh = await open(ticketKeyPath(dir), constants.O_RDONLY | constants.O_NOFOLLOW)
    try {
      const info = await fh.stat()
      if (!info.isFile()) return { unusable: 'it is not a regular file' }
      // Whoever could read it could have copied the keys: they are spent.
      if ((info.mode & 0o077) !== 0) return { unusable: `its mode ${(info.mode & 0o777).toString(8)} lets group or others at it` }
      bytes = await fh.readFile()
    } finally {
      await fh.close()
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return { missing: true }
    return { unusable: code === 'ELOOP' ? 'it is a symbolic link' : `it cannot be read (${code ?? 'error'})` }
  }
  const decoded = decodeStateFile(bytes)
  if ('problem' in decoded) return { unusable: decoded.problem }
  const parsed = fileBodySchema.safeParse(decoded.body)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    return { unusable: `its content does not match the schema (${issue?.path.map(String).join('.') || '(root)'}: ${issue?.message ?? 'invalid'})` }
  }
  const body = parsed.data
  return { record: { keys: Buffer.from(body.keys, 'base64'), createdAt: Date.parse(body.created_at), crlSha256: body.crl_sha256 } }
}

/** Replaces the file atomically (the folder is created 0700 if missing); a crash leaves the old file or the new one. */
export async function writeTicketKeyFile(dir: string, record: TicketKeyRecord): Promise<void> {
  if (record.keys.length !== TICKET_KEY_BYTES) throw new RangeError(`ticket keys must be ${TICKET_KEY_BYTES} bytes`)
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const path = ticketKeyPath(dir)
  const text = encodeStateFile({
    kind: 'tls-ticket-keys',
    created_at: new Date(record.createdAt).toISOString(),
    crl_sha256: record.crlSha256,
    keys: record.keys.toString('base64'),
  })
  replaceFileAtomically(path, dir, text, 0o600)
}

/** Deletes temp files an interrupted write left behind (they hold keys too). */
export async function removeTicketKeyTemps(dir: string): Promise<void> {
  try {
    removeLeftoverTemps(dir, TICKET_KEY_FILE)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
}
