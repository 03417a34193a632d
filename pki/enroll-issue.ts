/**
 * The signer's one pass over what it pulled (SPEC "Device enrollment and renewal"): under the PKI lock,
 * every request is judged against the index and the tokens as they stand (a second request of the same
 * batch sees the first one's certificate), approved ones are signed with role `node`, a token's use is
 * spent only when it issues, a re-enrollment revokes the certificates it supersedes in the same step, and
 * the index, the tokens and (after a revocation) the CRL are written once for the batch.
 */
import { loadCa } from './ca.js'
import { clientExtensions, wholeSecond } from './cert-builder.js'
import { readFile } from 'node:fs/promises'
import { childrenOf, decodeTime, isTime, readDer } from '../src/der/der.js'
import { judge, type PulledRequest, type Verdict } from './enroll-judge.js'
import { withHistory, writeIndex, type CertRecord, type PkiIndex } from './index-file.js'
import { PKI_FILES, pkiPath } from './layout.js'
import { clientSubject, holdersOf, signLeaf } from './leaf.js'
import { withPki } from './pki-dir.js'
import { publishCrl } from './revocation.js'
import { DEFAULT_CRL_DAYS } from './crl.js'
import { readTokenFile, writeTokenFile, type TokenRecord } from './token-store.js'
import { PkiError } from './errors.js'

/** What the signer posts back for one request, or keeps for the operator. */
export type SignerOutcome =
  | { readonly request_id: string; readonly name: string; readonly kind: PulledRequest['kind']; readonly issued: { readonly certificate: string; readonly serial: string; readonly rule: string; readonly supersedes: readonly string[] } }
  | { readonly request_id: string; readonly name: string; readonly kind: PulledRequest['kind']; readonly denied: string }
  | { readonly request_id: string; readonly name: string; readonly kind: PulledRequest['kind']; readonly held: string }

/** One pass's result: what to post, and the CRL to push when this pass revoked something. */
export interface PassResult {
  readonly outcomes: readonly SignerOutcome[]
  /** The new CRL (PEM) when the pass revoked superseded certificates, else null. */
  readonly crl: string | null
}

export interface PassOptions {
  readonly now?: Date
  /** `pxe-pki enroll approve`: issue what a token's policy would hold. */
  readonly approving?: boolean
  readonly crlDays?: number
}

function outcomeOf(req: PulledRequest, verdict: Exclude<Verdict, { kind: 'issue' }>): SignerOutcome {
  const base = { request_id: req.request_id, name: req.name, kind: req.kind }
  return verdict.kind === 'deny' ? { ...base, denied: verdict.reason } : { ...base, held: verdict.why }
}

/** Judges and signs `requests` in one locked pass over the PKI. */
export async function signPass(dir: string, requests: readonly PulledRequest[], opts: PassOptions = {}): Promise<PassResult> {
  const now = opts.now ?? new Date()
  if (requests.length === 0) return { outcomes: [], crl: null }
  return withPki(dir, async (startIndex) => {
    const ca = await loadCa(dir)
    const file = await readTokenFile(dir)
    const tokens = new Map<string, TokenRecord>(file.tokens.map((t) => [t.id, t]))
    let index: PkiIndex = startIndex
    const outcomes: SignerOutcome[] = []
    const issued: CertRecord[] = []
    const revokedAt = wholeSecond(now).toISOString()
    let revoked = 0
    for (const req of requests) {
      const verdict = judge(req, { index, tokens, now, approving: opts.approving === true })
      if (verdict.kind !== 'issue') {
        outcomes.push(outcomeOf(req, verdict))
        continue
      }
      // strictly newer than every certificate the name holds: the controller takes the new one for a rotation
      const latest = Math.max(0, ...holdersOf(index, verdict.csr.name, now).map((c) => Date.parse(c.not_before)))
      const notBefore = new Date(Math.max(wholeSecond(now).getTime(), latest + 1000))
      const { certPem, record } = await signLeaf(ca, {
        name: verdict.csr.name, role: 'node', subject: clientSubject(verdict.csr.name, 'node'), spkiDer: verdict.csr.spkiDer,
        extensions: clientExtensions(verdict.csr.keyType), days: 1, lifetimeMs: verdict.lifetimeMs, notBefore,
        command: req.kind === 'renew' ? 'renew' : 'enroll', now, replaces: verdict.supersedes, requestId: req.request_id,
      })
      const superseded = new Set(verdict.supersedes)
      index = { ...index, certs: [...index.certs.map((c) => (superseded.has(c.serial) ? { ...c, revoked_at: revokedAt, reason: 'superseded' } : c)), record] }
      revoked += superseded.size
      issued.push(record)
      if (verdict.token !== null) {
        const token = tokens.get(verdict.token.id)!
        tokens.set(token.id, { ...token, uses_left: token.uses_left - 1 })
      }
      outcomes.push({ request_id: req.request_id, name: req.name, kind: req.kind, issued: { certificate: certPem, serial: record.serial, rule: verdict.rule, supersedes: verdict.supersedes } })
    }
    if (issued.length === 0) {
      return { outcomes, crl: null }
    }
    const counts = `issued ${issued.length} (${issued.map((r) => `${r.name} ${r.serial}`).join(', ')})${revoked > 0 ? `, revoked ${revoked} superseded` : ''}`
    // the uses first: a crash before the index is written leaves a use spent, never a second issue under it
    await writeTokenFile(dir, { ...file, tokens: file.tokens.map((t) => tokens.get(t.id) ?? t) })
    if (revoked === 0) {
      await writeIndex(dir, withHistory(index, now, opts.approving === true ? 'enroll approve' : 'signer', counts))
      return { outcomes, crl: null }
    }
    const next = withHistory({ ...index, crl_number: index.crl_number + 1 }, now, opts.approving === true ? 'enroll approve' : 'signer', `${counts}, CRL ${index.crl_number + 1}`)
    await publishCrl(dir, next, now, opts.crlDays ?? DEFAULT_CRL_DAYS)
    return { outcomes, crl: await readFile(pkiPath(dir, PKI_FILES.crl), 'utf8') }
  })
}

/** thisUpdate and nextUpdate of the PKI's crl.pem. */
export async function crlWindow(dir: string): Promise<{ thisUpdate: Date; nextUpdate: Date | null }> {
  const pem = await readFile(pkiPath(dir, PKI_FILES.crl), 'utf8')
  const match = /-----BEGIN X509 CRL-----([A-Za-z0-9+/=\s]+)-----END X509 CRL-----/.exec(pem)
  if (match === null) throw new PkiError(`${pkiPath(dir, PKI_FILES.crl)} is not a PEM CRL`)
  try {
    const [tbs] = childrenOf(readDer(Buffer.from(match[1]!.replace(/\s+/g, ''), 'base64')))
    const fields = childrenOf(tbs!)
    const at = fields[0]?.tag === 0x02 ? 1 : 0 // version is optional (v1 CRLs have none)
    const thisUpdate = decodeTime(fields[at + 2], 'thisUpdate')
    const next = fields[at + 3]
    return { thisUpdate, nextUpdate: isTime(next) ? decodeTime(next, 'nextUpdate') : null }
  } catch (err) {
    if (err instanceof PkiError) throw err
    throw new PkiError(`${pkiPath(dir, PKI_FILES.crl)} cannot be read (${(err as Error).message})`)
  }
}

/** True when less than half of the CRL's validity is left at `now` (the signer then re-signs and pushes it). */
export function crlNeedsRefresh(window: { thisUpdate: Date; nextUpdate: Date | null }, now: Date): boolean {
  if (window.nextUpdate === null) return false
  const half = window.thisUpdate.getTime() + (window.nextUpdate.getTime() - window.thisUpdate.getTime()) / 2
  return now.getTime() >= half
}
