/**
 * The enrollment queue (SPEC "Device enrollment and renewal"): CSRs that wait for the signer, and the
 * answers it posted, until the node fetched them. The controller never signs and never sees a token's
 * secret: it keeps each request as it came (the proof with it, for the signer to check) and bounds what
 * strangers can put in it: at most `maxPending` requests wait in all, `perSourcePending` from one address,
 * `perTokenPending` under one token id, so that a flood from one address or one token leaves room for the
 * others. A request is gone `pendingMs` after it came if still pending, `decidedMs` after its answer.
 *
 * Pure: the clock is passed in as `now` (ms) and the request ids come from the caller.
 */
import { AppError } from '../errors.js'

export type EnrollKind = 'enroll' | 'renew'
export type EnrollStatus = 'pending' | 'issued' | 'denied'

/** What a node sent (checked by the caller: shape, CSR signature, key and name). */
export interface EnrollSubmission {
  readonly kind: EnrollKind
  readonly name: string
  readonly csr: string
  /** SHA-256 of the CSR's DER (hex): the same CSR again is the same request. */
  readonly fingerprint: string
  /** An enrollment's token id and proof; null for a renewal. */
  readonly tokenId: string | null
  readonly proof: string | null
  /** The source address of the request. */
  readonly source: string
  /** A renewal: the serial of the certificate that asked; null for an enrollment. */
  readonly presentingSerial: string | null
}

/** A request in the queue. */
export interface EnrollRequest extends EnrollSubmission {
  readonly id: string
  readonly createdAt: number
  status: EnrollStatus
  certificate: string | null
  reason: string | null
  decidedAt: number | null
  /** The signer's certificate name, and the rule it issued under ("token_auto", "manual", "renewal"). */
  decidedBy: string | null
  rule: string | null
}

/** What the signer posts for a request. */
export type EnrollDecision =
  | { readonly certificate: string; readonly by: string; readonly rule: string }
  | { readonly denied: string; readonly by: string }

export interface EnrollLimits {
  readonly maxPending: number
  readonly perSourcePending: number
  readonly perTokenPending: number
  readonly pendingMs: number
  readonly decidedMs: number
}

/** The SPEC's figures (pending at most 10,000; 1 hour pending, 10 minutes after the answer). */
export const DEFAULT_ENROLL_LIMITS: EnrollLimits = {
  maxPending: 10_000,
  perSourcePending: 8,
  perTokenPending: 2_000,
  pendingMs: 60 * 60 * 1000,
  decidedMs: 10 * 60 * 1000,
}

/** How many ids of requests that are gone are remembered, so that a late poll gets 410, not 404. */
const GONE_IDS_KEPT = 20_000

/** Changes since the last takeChanges(): requests to write, ids to delete. */
export interface EnrollChanges {
  readonly put: readonly EnrollRequest[]
  readonly deleted: readonly string[]
}

/** The queue of one controller (the leader's, with HA). */
export class EnrollQueue {
  /** Every request, in order of arrival (pending ones expire from the front). */
  private readonly byId = new Map<string, EnrollRequest>()
  private readonly byFingerprint = new Map<string, EnrollRequest>()
  /** Decided requests in order of their answer (they expire from the front). */
  private readonly decided = new Map<string, EnrollRequest>()
  /** The pending renewal of each name (a new one replaces it). */
  private readonly renewalOf = new Map<string, EnrollRequest>()
  private readonly pendingBySource = new Map<string, number>()
  private readonly pendingByToken = new Map<string, number>()
  private pendingCount = 0
  private readonly gone = new Set<string>()
  private readonly changed = new Set<string>()
  private readonly deletedIds = new Set<string>()

  constructor(readonly limits: EnrollLimits = DEFAULT_ENROLL_LIMITS) {}

  /** Requests waiting for the signer. */
  get pending(): number {
    return this.pendingCount
  }

  /** Every request held (pending and answered). */
  get size(): number {
    return this.byId.size
  }

  /**
   * Queues a request, or returns the one the same CSR made (`created` false). A renewal replaces the name's
   * pending renewal. Refused with 429 `rate_limited` (nothing changes) when the queue, the address or the
   * token id is full.
   */
  submit(now: number, input: EnrollSubmission, newId: () => string): { request: EnrollRequest; created: boolean } {
    this.expire(now)
    const same = this.byFingerprint.get(input.fingerprint)
    if (same !== undefined && same.kind === input.kind && same.name === input.name) return { request: same, created: false }
    const replaced = input.kind === 'renew' ? this.renewalOf.get(input.name) : undefined
    const freed = replaced === undefined ? 0 : 1
    const full = (what: string, retryMs: number): AppError =>
      new AppError('rate_limited', `${what}: try again later`, { retry_after_ms: retryMs }, { 'retry-after': String(Math.ceil(retryMs / 1000)) })
    if (this.pendingCount - freed >= this.limits.maxPending) throw full(`the enrollment queue is full (${this.limits.maxPending} requests wait for the signer)`, 30_000)
    const sameSource = replaced !== undefined && replaced.source === input.source ? 1 : 0
    if ((this.pendingBySource.get(input.source) ?? 0) - sameSource >= this.limits.perSourcePending) {
      throw full(`this address has ${this.limits.perSourcePending} requests waiting already`, 60_000)
    }
    if (input.tokenId !== null && (this.pendingByToken.get(input.tokenId) ?? 0) >= this.limits.perTokenPending) {
      throw full(`this token has ${this.limits.perTokenPending} requests waiting already`, 60_000)
    }
    if (replaced !== undefined) this.remove(replaced, false)
    if (same !== undefined) this.remove(same, false) // the same CSR for another kind or name: the newer asks
    let id = newId()
    while (this.byId.has(id) || this.gone.has(id)) id = newId()
    const request: EnrollRequest = { ...input, id, createdAt: now, status: 'pending', certificate: null, reason: null, decidedAt: null, decidedBy: null, rule: null }
    this.add(request)
    this.changed.add(id)
    return { request, created: true }
  }

  /** The request `id`; 410 `gone` once past its time, 404 `not_found` when never known. */
  get(now: number, id: string): EnrollRequest {
    this.expire(now)
    const request = this.byId.get(id)
    if (request !== undefined) return request
    if (this.gone.has(id)) throw new AppError('gone', 'this request is past its time (1 hour pending, 10 minutes after its answer): send a new one')
    throw new AppError('not_found', 'no such request')
  }

  /**
   * Up to `limit` pending requests, oldest first (what the signer pulls); with `after`, those that came after
   * that request (a page further: requests held for an operator never hide newer ones).
   */
  listPending(now: number, limit: number, after?: string): EnrollRequest[] {
    this.expire(now)
    const out: EnrollRequest[] = []
    let skipping = after !== undefined && this.byId.has(after)
    for (const request of this.byId.values()) {
      if (skipping) {
        if (request.id === after) skipping = false
        continue
      }
      if (out.length >= limit) break
      if (request.status === 'pending') out.push(request)
    }
    return out
  }

  /** Records the signer's answer to a pending request (the caller checked a certificate against the request). */
  decide(now: number, id: string, decision: EnrollDecision): EnrollRequest {
    const request = this.get(now, id)
    if (request.status !== 'pending') throw new AppError('identity_conflict', `the request was ${request.status} already`)
    this.countPending(request, -1)
    if ('certificate' in decision) {
      request.status = 'issued'
      request.certificate = decision.certificate
      request.rule = decision.rule
    } else {
      request.status = 'denied'
      request.reason = decision.denied
    }
    request.decidedAt = now
    request.decidedBy = decision.by
    if (this.renewalOf.get(request.name) === request) this.renewalOf.delete(request.name)
    this.decided.set(id, request)
    this.changed.add(id)
    return request
  }

  /** Drops requests past their time. O(1) when none is due. */
  expire(now: number): void {
    for (const request of this.byId.values()) {
      if (now - request.createdAt <= this.limits.pendingMs) break // arrival order: every later one is younger
      if (request.status === 'pending') this.remove(request, true) // an answered one goes by its answer's time, below
    }
    for (const request of this.decided.values()) {
      if (now - request.decidedAt! <= this.limits.decidedMs) break
      this.remove(request, true)
    }
  }

  /** What changed since the last call, for the store (the proof stays in memory: the store seals it). */
  takeChanges(): EnrollChanges {
    const put: EnrollRequest[] = []
    for (const id of this.changed) {
      const request = this.byId.get(id)
      if (request !== undefined) put.push(request)
    }
    const deleted = [...this.deletedIds]
    this.changed.clear()
    this.deletedIds.clear()
    return { put, deleted }
  }

  /** Hands back changes a store failed to write: they go with the next write (those still held). */
  requeueChanges(changes: EnrollChanges): void {
    for (const request of changes.put) if (this.byId.get(request.id) === request) this.changed.add(request.id)
    for (const id of changes.deleted) if (!this.byId.has(id)) this.deletedIds.add(id)
  }

  /** True when takeChanges() has something. */
  get dirty(): boolean {
    return this.changed.size > 0 || this.deletedIds.size > 0
  }

  /** Loads what a store kept (a restart, a take-over), oldest first; requests past their time are dropped. */
  restore(requests: readonly EnrollRequest[], now: number): void {
    const ordered = [...requests].sort((a, b) => a.createdAt - b.createdAt)
    for (const request of ordered) {
      if (this.byId.has(request.id)) continue
      this.add({ ...request })
    }
    for (const request of [...this.byId.values()].filter((r) => r.decidedAt !== null).sort((a, b) => a.decidedAt! - b.decidedAt!)) {
      this.decided.delete(request.id)
      this.decided.set(request.id, request)
    }
    this.expire(now)
    this.changed.clear()
  }

  private add(request: EnrollRequest): void {
    this.byId.set(request.id, request)
    this.byFingerprint.set(request.fingerprint, request)
    if (request.status === 'pending') {
      this.countPending(request, 1)
      if (request.kind === 'renew') this.renewalOf.set(request.name, request)
    } else this.decided.set(request.id, request)
  }

  private remove(request: EnrollRequest, expired: boolean): void {
    if (this.byId.get(request.id) !== request) return
    this.byId.delete(request.id)
    if (this.byFingerprint.get(request.fingerprint) === request) this.byFingerprint.delete(request.fingerprint)
    if (this.renewalOf.get(request.name) === request) this.renewalOf.delete(request.name)
    this.decided.delete(request.id)
    if (request.status === 'pending') this.countPending(request, -1)
    this.changed.delete(request.id)
    this.deletedIds.add(request.id)
    if (expired) {
      this.gone.add(request.id)
      if (this.gone.size > GONE_IDS_KEPT) this.gone.delete(this.gone.values().next().value!)
    }
  }

  private countPending(request: EnrollRequest, delta: 1 | -1): void {
    this.pendingCount += delta
    bump(this.pendingBySource, request.source, delta)
    if (request.tokenId !== null) bump(this.pendingByToken, request.tokenId, delta)
  }
}

function bump(map: Map<string, number>, key: string, delta: number): void {
  const value = (map.get(key) ?? 0) + delta
  if (value <= 0) map.delete(key)
  else map.set(key, value)
}
