/**
 * An enrollment request as a store keeps it (the state directory, or etcd with HA): one JSON record per
 * request. The proof is kept sealed (`proof_sealed`, core/enroll-queue.ts hands it in the clear to the
 * caller's sealer), so no state file or etcd value holds a proof a reader could take.
 */
import { z } from 'zod'
import type { EnrollRequest } from './enroll-queue.js'
import { NAME_PATTERN } from './names.js'
import { TOKEN_ID_PATTERN } from './enroll-token.js'

const ms = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER)
/** At most the enrollment body's 16 KiB: a record cannot be larger than what a node could send. */
const PEM_TEXT = z.string().max(16 * 1024)

export const storedEnrollSchema = z
  .object({
    v: z.literal(1),
    id: z.string().regex(/^[A-Za-z0-9_-]{22}$/),
    kind: z.enum(['enroll', 'renew']),
    name: z.string().regex(NAME_PATTERN),
    csr: PEM_TEXT,
    fingerprint: z.string().regex(/^[0-9a-f]{64}$/),
    token_id: z.string().regex(TOKEN_ID_PATTERN).nullable(),
    proof_sealed: z.string().max(256).nullable(),
    source: z.string().max(64),
    presenting_serial: z.string().regex(/^[0-9a-f]{1,64}$/).nullable(),
    created_at: ms,
    status: z.enum(['pending', 'issued', 'denied']),
    certificate: z.string().max(16 * 1024).nullable(),
    reason: z.string().max(512).nullable(),
    decided_at: ms.nullable(),
    decided_by: z.string().max(64).nullable(),
    rule: z.string().max(32).nullable(),
  })
  .strict()
export type StoredEnroll = z.infer<typeof storedEnrollSchema>

/** Seals and opens proofs for the store, bound to the request id. */
export interface ProofSealer {
  seal(requestId: string, proof: string): string
  /** The proof, or null when the sealed text does not open under this key (another deployment's, or tampered). */
  open(requestId: string, sealed: string): string | null
}

/** The record a store writes for `request`. */
export function storedEnroll(request: EnrollRequest, sealer: ProofSealer): StoredEnroll {
  return {
    v: 1,
    id: request.id,
    kind: request.kind,
    name: request.name,
    csr: request.csr,
    fingerprint: request.fingerprint,
    token_id: request.tokenId,
    proof_sealed: request.proof === null ? null : sealer.seal(request.id, request.proof),
    source: request.source,
    presenting_serial: request.presentingSerial,
    created_at: request.createdAt,
    status: request.status,
    certificate: request.certificate,
    reason: request.reason,
    decided_at: request.decidedAt,
    decided_by: request.decidedBy,
    rule: request.rule,
  }
}

/** The request a stored record holds; a proof that does not open is dropped (the signer then denies the request). */
export function requestOf(stored: StoredEnroll, sealer: ProofSealer): EnrollRequest {
  return {
    id: stored.id,
    kind: stored.kind,
    name: stored.name,
    csr: stored.csr,
    fingerprint: stored.fingerprint,
    tokenId: stored.token_id,
    proof: stored.proof_sealed === null ? null : sealer.open(stored.id, stored.proof_sealed),
    source: stored.source,
    presentingSerial: stored.presenting_serial,
    createdAt: stored.created_at,
    status: stored.status,
    certificate: stored.certificate,
    reason: stored.reason,
    decidedAt: stored.decided_at,
    decidedBy: stored.decided_by,
    rule: stored.rule,
  }
}

/** A store of enrollment requests: loaded when a controller starts serving, written as the queue changes. */
export interface EnrollStore {
  load(): Promise<StoredEnroll[]>
  write(put: readonly StoredEnroll[], deleted: readonly string[]): Promise<void>
}
