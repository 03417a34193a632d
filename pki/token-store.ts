/**
 * Bootstrap tokens on the CA host (SPEC "Device enrollment and renewal"): `<pki>/tokens.json`, mode 0600
 * like the CA key, since it holds each token's secret. A token is printed once, when it is made; `list`
 * never shows a secret; every action is recorded in the index history (without the secret). The signer
 * reads a token to check a proof and spends a use only when it issues.
 */
import { randomBytes } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { z } from 'zod'
import { formatToken, nameMatchesPattern, namePatternProblem, TOKEN_ID_PATTERN, tokenIdFromBytes } from '../src/core/enroll-token.js'
import { writeFileAtomic } from './atomic-write.js'
import { withHistory, writeIndex } from './index-file.js'
import { PKI_FILES, pkiPath } from './layout.js'
import { readPki, withPki } from './pki-dir.js'
import { PkiError, UsageError } from './errors.js'
import { printable } from './serial.js'

const isoDate = z.iso.datetime({ offset: true })

export const APPROVE_MODES = ['auto', 'manual'] as const
export const REENROLL_MODES = ['allow', 'manual'] as const
export type ApproveMode = (typeof APPROVE_MODES)[number]
export type ReenrollMode = (typeof REENROLL_MODES)[number]

/** Lifetime of enrolled certificates: 1 day by default, at most 90 (SPEC). */
export const DEFAULT_ENROLL_CERT_DAYS = 1
export const MAX_ENROLL_CERT_DAYS = 90
export const DEFAULT_TOKEN_USES = 1
export const MAX_TOKEN_USES = 1_000_000
export const DEFAULT_TOKEN_TTL_MS = 24 * 3_600_000
export const MAX_TOKEN_TTL_MS = 365 * 24 * 3_600_000

const tokenRecordSchema = z.strictObject({
  id: z.string().regex(TOKEN_ID_PATTERN),
  names: z.string().refine((p) => namePatternProblem(p) === null, 'not a name pattern'),
  uses: z.number().int().min(1).max(MAX_TOKEN_USES),
  uses_left: z.number().int().min(0).max(MAX_TOKEN_USES),
  created_at: isoDate,
  expires_at: isoDate,
  approve: z.enum(APPROVE_MODES),
  cert_days: z.number().int().min(1).max(MAX_ENROLL_CERT_DAYS),
  /** `--cert-ttl`: a lifetime shorter than a day (short-lived identities); overrides cert_days. */
  cert_seconds: z.number().int().min(60).max(MAX_ENROLL_CERT_DAYS * 86_400).optional(),
  reenroll: z.enum(REENROLL_MODES),
  secret: z.string().regex(/^[A-Za-z0-9_-]{43}$/),
  revoked_at: isoDate.optional(),
})
export type TokenRecord = z.infer<typeof tokenRecordSchema>

const tokenFileSchema = z.strictObject({
  format: z.literal('pxe-pki-tokens'),
  version: z.literal(1),
  tokens: z.array(tokenRecordSchema),
})
export type TokenFile = z.infer<typeof tokenFileSchema>

/** What `token create` takes. */
export interface TokenOptions {
  readonly names: string
  readonly uses?: number
  readonly ttlMs?: number
  readonly approve?: ApproveMode
  readonly certDays?: number
  /** A certificate lifetime in ms (from 1 minute), instead of certDays. */
  readonly certTtlMs?: number
  readonly reenroll?: ReenrollMode
  readonly now?: Date
}

/** A token as `list` shows it: everything but the secret, and its status at the time of listing. */
export interface TokenEntry {
  readonly id: string
  readonly names: string
  readonly uses: number
  readonly uses_left: number
  readonly created_at: string
  readonly expires_at: string
  readonly approve: ApproveMode
  readonly cert_days: number
  readonly cert_seconds?: number
  readonly reenroll: ReenrollMode
  readonly status: 'active' | 'expired' | 'revoked' | 'used_up'
  readonly revoked_at?: string
}

/** Why a token cannot enroll at `now`, or null. */
export function tokenUnusable(token: TokenRecord, now: Date): string | null {
  if (token.revoked_at !== undefined) return `token ${token.id} was revoked at ${token.revoked_at}`
  if (Date.parse(token.expires_at) <= now.getTime()) return `token ${token.id} expired at ${token.expires_at}`
  if (token.uses_left <= 0) return `token ${token.id} has no use left (of ${token.uses})`
  return null
}

/** The lifetime of the certificates a token enrolls (ms). */
export function tokenCertLifetimeMs(token: TokenRecord): number {
  return (token.cert_seconds ?? token.cert_days * 86_400) * 1000
}

/** True when `name` may enroll under the token's pattern. */
export function tokenAllowsName(token: TokenRecord, name: string): boolean {
  return nameMatchesPattern(token.names, name)
}

function entryOf(token: TokenRecord, now: Date): TokenEntry {
  const status = token.revoked_at !== undefined ? 'revoked' : Date.parse(token.expires_at) <= now.getTime() ? 'expired' : token.uses_left <= 0 ? 'used_up' : 'active'
  const { secret: _secret, ...rest } = token
  return { ...rest, status }
}

/** The token file (with secrets): the signer reads it under the PKI lock. */
export async function readTokenFile(dir: string): Promise<TokenFile> {
  const path = pkiPath(dir, PKI_FILES.tokens)
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { format: 'pxe-pki-tokens', version: 1, tokens: [] }
    throw err
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    throw new PkiError(`${path} is not valid JSON; the token file is damaged`)
  }
  const parsed = tokenFileSchema.safeParse(json)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    // never the value: it may be a secret
    throw new PkiError(`${path} is not a pxe-pki token file${issue === undefined ? '' : ` (at "${issue.path.join('.')}")`}`)
  }
  return parsed.data
}

/** Writes the token file (0600, atomically); callers hold the PKI lock. */
export async function writeTokenFile(dir: string, file: TokenFile): Promise<void> {
  await writeFileAtomic(pkiPath(dir, PKI_FILES.tokens), `${JSON.stringify(file, null, 2)}\n`, 0o600)
}

/** Parses a duration like 90s, 30m, 12h or 7d (a whole number and one unit). */
export function parseDuration(text: string, flag: string, maxMs = MAX_TOKEN_TTL_MS): number {
  const match = /^([0-9]{1,7})(s|m|h|d)$/.exec(text)
  if (match === null) throw new UsageError(`invalid ${flag} "${printable(text)}": expected a whole number and a unit, e.g. 30m, 12h or 7d`)
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 's' | 'm' | 'h' | 'd']
  const ms = Number(match[1]) * unit
  if (ms < 60_000 || ms > maxMs) throw new UsageError(`invalid ${flag} "${printable(text)}": from 1m to ${maxMs / 86_400_000}d`)
  return ms
}

function checkOptions(opts: TokenOptions): Required<Omit<TokenOptions, 'now' | 'certTtlMs'>> & { certSeconds: number | undefined } {
  const problem = namePatternProblem(opts.names)
  if (problem !== null) throw new UsageError(`invalid --names "${printable(opts.names)}": a name pattern ${problem}`)
  const uses = opts.uses ?? DEFAULT_TOKEN_USES
  if (!Number.isSafeInteger(uses) || uses < 1 || uses > MAX_TOKEN_USES) throw new UsageError(`invalid --uses ${uses}: from 1 to ${MAX_TOKEN_USES}`)
  const certDays = opts.certDays ?? DEFAULT_ENROLL_CERT_DAYS
  if (!Number.isSafeInteger(certDays) || certDays < 1 || certDays > MAX_ENROLL_CERT_DAYS) {
    throw new UsageError(`invalid --cert-days ${certDays}: enrolled certificates live from 1 to ${MAX_ENROLL_CERT_DAYS} days`)
  }
  const ttlMs = opts.ttlMs ?? DEFAULT_TOKEN_TTL_MS
  if (!Number.isSafeInteger(ttlMs) || ttlMs < 60_000 || ttlMs > MAX_TOKEN_TTL_MS) throw new UsageError('invalid --ttl: from 1m to 365d')
  const certTtl = opts.certTtlMs
  if (certTtl !== undefined && (!Number.isSafeInteger(certTtl) || certTtl < 60_000 || certTtl > MAX_ENROLL_CERT_DAYS * 86_400_000 || certTtl % 1000 !== 0)) {
    throw new UsageError(`invalid --cert-ttl: from 1m to ${MAX_ENROLL_CERT_DAYS}d`)
  }
  const certSeconds = certTtl === undefined ? undefined : certTtl / 1000
  return { names: opts.names, uses, ttlMs, approve: opts.approve ?? 'auto', certDays, certSeconds, reenroll: opts.reenroll ?? 'manual' }
}

/** Makes a token; returns its one printable form (shown once) and its entry. */
export async function createToken(dir: string, opts: TokenOptions): Promise<{ token: string; entry: TokenEntry }> {
  const checked = checkOptions(opts)
  const now = opts.now ?? new Date()
  return withPki(dir, async (index) => {
    const file = await readTokenFile(dir)
    const ids = new Set(file.tokens.map((t) => t.id))
    let id = tokenIdFromBytes(randomBytes(7))
    while (ids.has(id)) id = tokenIdFromBytes(randomBytes(7))
    const secret = randomBytes(32)
    const record: TokenRecord = {
      id,
      names: checked.names,
      uses: checked.uses,
      uses_left: checked.uses,
      created_at: now.toISOString(),
      expires_at: new Date(now.getTime() + checked.ttlMs).toISOString(),
      approve: checked.approve,
      cert_days: checked.certDays,
      ...(checked.certSeconds === undefined ? {} : { cert_seconds: checked.certSeconds }),
      reenroll: checked.reenroll,
      secret: secret.toString('base64url'),
    }
    await writeTokenFile(dir, { ...file, tokens: [...file.tokens, record] })
    const detail = `id=${id} names=${record.names} uses=${record.uses} expires=${record.expires_at} approve=${record.approve} cert_days=${record.cert_days}${record.cert_seconds === undefined ? '' : ` cert_seconds=${record.cert_seconds}`} reenroll=${record.reenroll}`
    await writeIndex(dir, withHistory(index, now, 'token create', detail))
    return { token: formatToken({ id, secret }), entry: entryOf(record, now) }
  })
}

/** Every token, without secrets (reads only). */
export async function listTokens(dir: string, now = new Date()): Promise<TokenEntry[]> {
  await readPki(dir)
  return (await readTokenFile(dir)).tokens.map((t) => entryOf(t, now))
}

/** Revokes a token: no enrollment is issued under it any more (requests already issued stay issued). */
export async function revokeToken(dir: string, id: string, now = new Date()): Promise<TokenEntry> {
  if (!TOKEN_ID_PATTERN.test(id)) throw new UsageError(`invalid token id "${printable(id)}": 10 characters of base32 (a-z, 2-7)`)
  return withPki(dir, async (index) => {
    const file = await readTokenFile(dir)
    const token = file.tokens.find((t) => t.id === id)
    if (token === undefined) throw new PkiError(`no token ${id} in this PKI`)
    if (token.revoked_at !== undefined) throw new PkiError(`token ${id} was already revoked at ${token.revoked_at}`)
    const revoked = { ...token, revoked_at: now.toISOString() }
    await writeTokenFile(dir, { ...file, tokens: file.tokens.map((t) => (t.id === id ? revoked : t)) })
    await writeIndex(dir, withHistory(index, now, 'token revoke', `id=${id}`))
    return entryOf(revoked, now)
  })
}

/** The token `id` with its secret (for the signer), or null. */
export async function findToken(dir: string, id: string): Promise<TokenRecord | null> {
  return (await readTokenFile(dir)).tokens.find((t) => t.id === id) ?? null
}

/**
 * Spends one use of token `id` for an issue to `name`, under the PKI lock (a use is spent only when the
 * signer issues); refused when the token can no longer enroll.
 */
export async function spendTokenUse(dir: string, id: string, name: string, now = new Date()): Promise<TokenRecord> {
  return withPki(dir, async (index) => {
    const file = await readTokenFile(dir)
    const token = file.tokens.find((t) => t.id === id)
    if (token === undefined) throw new PkiError(`no token ${id} in this PKI`)
    const unusable = tokenUnusable(token, now)
    if (unusable !== null) throw new PkiError(unusable)
    const spent = { ...token, uses_left: token.uses_left - 1 }
    await writeTokenFile(dir, { ...file, tokens: file.tokens.map((t) => (t.id === id ? spent : t)) })
    await writeIndex(dir, withHistory(index, now, 'token use', `id=${id} name=${name} uses_left=${spent.uses_left}`))
    return spent
  })
}
