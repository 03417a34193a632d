/**
 * One pass of `pxe-pki signer` (SPEC "Device enrollment and renewal"): pull the pending requests, judge
 * and sign them in one locked pass over the PKI, post each answer, and keep the controllers' CRL current
 * (after a revocation, when less than half of its validity is left, or when crl.pem changed on this host,
 * e.g. after a hand-made `pxe-pki revoke`). Held requests stay pending for `pxe-pki enroll approve`.
 * An answer that could not be delivered is kept and posted again on the next pass instead of being judged
 * again: its certificate is already in the index, and a second judgement would see it as a re-enrollment.
 */
import { readFile } from 'node:fs/promises'
import { NoControllerError, type ControllerLink } from './controller-link.js'
import { crlNeedsRefresh, crlWindow, signPass } from './enroll-issue.js'
import type { PulledRequest } from './enroll-judge.js'
import { CONTROLLER_PAGE, postDecision, pullPending, pushCrl, type Decision } from './enroll-wire.js'
import { PKI_FILES, pkiPath } from './layout.js'
import { writeCrl } from './revocation.js'
import { printable } from './serial.js'

/** How long an undelivered answer is kept for its next delivery: a pending request lives 1 hour. */
const UNDELIVERED_KEEP_MS = 3_600_000
/** Pulls per pass at most (each page up to CONTROLLER_PAGE requests). */
const MAX_PAGES_PER_PASS = 20

/** What one pass did, for the progress line. */
export interface RoundReport {
  readonly issued: number
  readonly denied: number
  /** Requests held for the operator that this process had not reported before. */
  readonly newlyHeld: readonly { readonly request_id: string; readonly kind: string; readonly name: string; readonly why: string }[]
  readonly held: number
  /** The CRL number the controllers now enforce, when this pass pushed a new CRL. */
  readonly crlPushed: string | null
  /** True when the pass re-signed the CRL because half of its validity was gone. */
  readonly crlRefreshed: boolean
  /** One line per request denied or found settled (never a secret, a proof or a key). */
  readonly notes: readonly string[]
  /** One line per thing that went wrong: --once then exits 1. */
  readonly problems: readonly string[]
  /** False when no controller answered the pull. */
  readonly reached: boolean
}

export interface SignerRoundsOptions {
  readonly dir: string
  readonly link: ControllerLink
  readonly crlDays?: number
  readonly now?: () => Date
}

/** The signer's passes, with what it remembers between them. */
export class SignerRounds {
  private readonly undelivered = new Map<string, { decision: Decision; until: number; name: string }>()
  private readonly heldReported = new Set<string>()
  /** The crl.pem text the controllers took (or refused for good), so it is pushed once. */
  private lastPushedCrl: string | null = null

  constructor(private readonly opts: SignerRoundsOptions) {}

  /** Runs one pass; never throws for a controller or PKI problem (they are in `problems`). */
  async pass(): Promise<RoundReport> {
    const now = this.opts.now?.() ?? new Date()
    const problems: string[] = []
    const notes: string[] = []
    let issued = 0
    let denied = 0
    const held = new Map<string, RoundReport['newlyHeld'][number]>()
    const seen = new Set<string>()
    let reached = true
    try {
      for (let page = 0; page < MAX_PAGES_PER_PASS; page++) {
        const pulled = await pullPending(this.opts.link)
        const fresh = pulled.filter((r) => !seen.has(r.request_id))
        for (const r of fresh) seen.add(r.request_id)
        const counts = await this.answer(fresh, now, { notes, problems }, held)
        issued += counts.issued
        denied += counts.denied
        // a full page may hide older requests behind held ones: pull again while this one moved something
        if (pulled.length < CONTROLLER_PAGE || counts.issued + counts.denied === 0) break
      }
    } catch (err) {
      if (err instanceof NoControllerError) reached = false
      problems.push(err instanceof Error ? err.message : String(err))
    }
    this.forgetOld(now, seen)
    const crl = reached ? await this.keepCrlFresh(now, problems) : { pushed: null, refreshed: false }
    const newlyHeld = [...held.values()].filter((h) => !this.heldReported.has(h.request_id))
    for (const h of newlyHeld) this.heldReported.add(h.request_id)
    for (const id of this.heldReported) if (!held.has(id) && reached) this.heldReported.delete(id)
    return { issued, denied, newlyHeld, held: held.size, crlPushed: crl.pushed, crlRefreshed: crl.refreshed, notes, problems, reached }
  }

  /** Judges, signs and posts `requests`; counts what was delivered. */
  private async answer(requests: readonly PulledRequest[], now: Date, out: { notes: string[]; problems: string[] }, held: Map<string, RoundReport['newlyHeld'][number]>): Promise<{ issued: number; denied: number }> {
    let issued = 0
    let denied = 0
    const toJudge = requests.filter((r) => !this.undelivered.has(r.request_id))
    const deliveries: { request_id: string; name: string; decision: Decision }[] = []
    for (const r of requests) {
      const kept = this.undelivered.get(r.request_id)
      if (kept !== undefined) deliveries.push({ request_id: r.request_id, name: kept.name, decision: kept.decision })
    }
    const { outcomes } = await signPass(this.opts.dir, toJudge, { now, ...(this.opts.crlDays === undefined ? {} : { crlDays: this.opts.crlDays }) })
    for (const o of outcomes) {
      if ('issued' in o) deliveries.push({ request_id: o.request_id, name: o.name, decision: { certificate: o.issued.certificate } })
      else if ('denied' in o) deliveries.push({ request_id: o.request_id, name: o.name, decision: { denied: o.denied.slice(0, 256) } })
      else held.set(o.request_id, { request_id: o.request_id, kind: o.kind, name: o.name, why: o.held })
    }
    for (const d of deliveries) {
      try {
        const delivery = await postDecision(this.opts.link, d.request_id, d.decision)
        this.undelivered.delete(d.request_id)
        if (delivery.kind === 'delivered') {
          if ('certificate' in d.decision) issued++
          else {
            denied++
            out.notes.push(`denied ${d.request_id} (${printable(d.name)}): ${d.decision.denied}`)
          }
        } else if (delivery.kind === 'settled') {
          out.notes.push(`request ${d.request_id} (${printable(d.name)}) was ${delivery.why}; nothing posted`)
        } else {
          out.problems.push(`the controller refused the answer to ${d.request_id} (${printable(d.name)}): ${delivery.why}`)
        }
      } catch (err) {
        // kept: the next pass posts the same answer (the certificate stays in the index either way)
        this.undelivered.set(d.request_id, { decision: d.decision, until: now.getTime() + UNDELIVERED_KEEP_MS, name: d.name })
        out.problems.push(`could not deliver the answer to ${d.request_id} (${printable(d.name)}); kept for the next pass: ${err instanceof Error ? err.message : String(err)}`)
      }
    }
    return { issued, denied }
  }

  private forgetOld(now: Date, seen: ReadonlySet<string>): void {
    for (const [id, kept] of this.undelivered) if (kept.until <= now.getTime() && !seen.has(id)) this.undelivered.delete(id)
  }

  /** Re-signs the CRL when half its validity is gone, and pushes crl.pem when the controllers do not have it yet. */
  private async keepCrlFresh(now: Date, problems: string[]): Promise<{ pushed: string | null; refreshed: boolean }> {
    let refreshed = false
    try {
      if (crlNeedsRefresh(await crlWindow(this.opts.dir), now)) {
        await writeCrl(this.opts.dir, { now, ...(this.opts.crlDays === undefined ? {} : { crlDays: this.opts.crlDays }) })
        refreshed = true
      }
      const pem = await readFile(pkiPath(this.opts.dir, PKI_FILES.crl), 'utf8')
      if (pem === this.lastPushedCrl) return { pushed: null, refreshed }
      const result = await pushCrl(this.opts.link, pem)
      this.lastPushedCrl = pem
      if (!result.ok) {
        problems.push(`the controller refused the CRL of ${pkiPath(this.opts.dir, PKI_FILES.crl)}: ${result.why}`)
        return { pushed: null, refreshed }
      }
      return { pushed: result.changed ? (result.crlNumber ?? '?') : null, refreshed }
    } catch (err) {
      problems.push(`the CRL was not kept fresh: ${err instanceof Error ? err.message : String(err)}`)
      return { pushed: null, refreshed }
    }
  }
}
