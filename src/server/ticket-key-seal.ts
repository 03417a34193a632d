/**
 * Sealing of the TLS session-ticket keys that HA replicas share through etcd, so that a node's TLS
 * session survives a take-over (the new leader resumes it instead of a full handshake).
 *
 * Whoever holds the ticket keys can mint a TLS session for any certificate (a ticket carries the
 * client's certificate) and read what a ticket holds. So etcd must never hold them in the clear: they
 * are sealed with AES-256-GCM under a key that only the controllers can compute,
 *
 *     seal key = HKDF-SHA256(ikm = the plan-signing private key (Ed25519 seed, 32 bytes),
 *                            salt = SEAL_SALT, info = "seal" ‖ the HA prefix)
 *
 * The plan-signing key is the one secret every replica must share anyway (nodes pin its public half), it
 * never goes to etcd, and whoever holds it can already command every node, so deriving from it gives an
 * etcd reader nothing and a thief of the plan key no power it did not have (SECURITY.md). The prefix in
 * `info` keeps two deployments on one etcd, even with one plan key, from adopting each other's keys.
 *
 * The record's metadata (when the keys were drawn, the CRL they belong to) is the AEAD's associated data:
 * an etcd writer cannot make old keys look young or move them to another CRL, only replace the record
 * with garbage (the replicas then draw their own) or with an earlier record they sealed (refused when it
 * belongs to another CRL or is too old). `seal_id` names the seal key (a separate HKDF output, so it says
 * nothing about the key itself): a replica with other plan keys (during a plan-key rotation) sees at once
 * that a record is not for it, instead of taking it for tampering.
 *
 * Pure apart from the random nonce: no I/O, no clock.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes, type KeyObject } from 'node:crypto'
import { z } from 'zod'
import { TICKET_KEY_BYTES } from './ticket-key-file.js'

/** Fixed salt of the derivation: a versioned label, so that a later scheme derives other keys. */
const SEAL_SALT = Buffer.from('discord-pxe tls-ticket-key seal v1', 'latin1')
const NONCE_BYTES = 12
const TAG_BYTES = 16

/** The record stored in etcd (JSON). */
export const sealedTicketKeysSchema = z
  .object({
    v: z.literal(1),
    /** Epoch ms when the keys were drawn. */
    created_at: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    /** SHA-256 (hex) of the CRL in force when they were drawn (ticket-key-file.ts crlFingerprint). */
    crl_sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lower-case hex digits'),
    seal_id: z.string().regex(/^[0-9a-f]{32}$/, 'must be 32 lower-case hex digits'),
    nonce: z.string().regex(/^[A-Za-z0-9+/]{16}$/, `must be ${NONCE_BYTES} bytes in base64`),
    /** The 48 key bytes encrypted, then the 16-byte tag. */
    sealed: z.string().regex(/^[A-Za-z0-9+/]{86}==$/, `must be ${TICKET_KEY_BYTES + TAG_BYTES} bytes in base64`),
  })
  .strict()

export type SealedTicketKeys = z.infer<typeof sealedTicketKeysSchema>

/** What sealed keys are bound to. */
export interface TicketKeyBinding {
  readonly createdAt: number
  readonly crlSha256: string
}

/** The seal key of one deployment; the key bytes are a private field (never shown by inspect or JSON). */
export class TicketSealKey {
  readonly #key: Buffer
  /** Names this seal key in records (not secret). */
  readonly id: string

  private constructor(key: Buffer, id: string) {
    this.#key = key
    this.id = id
  }

  /** Derives the seal key from the plan-signing private key (Ed25519) and the HA prefix. */
  static derive(planPrivateKey: KeyObject, prefix: string): TicketSealKey {
    if (planPrivateKey.asymmetricKeyType !== 'ed25519') throw new TypeError('the seal key is derived from an Ed25519 plan-signing key')
    const d = planPrivateKey.export({ format: 'jwk' }).d
    if (typeof d !== 'string') throw new TypeError('the plan-signing key has no private part')
    const seed = Buffer.from(d, 'base64url')
    try {
      const key = Buffer.from(hkdfSync('sha256', seed, SEAL_SALT, Buffer.from(`seal\0${prefix}`, 'utf8'), 32))
      const id = Buffer.from(hkdfSync('sha256', seed, SEAL_SALT, Buffer.from(`id\0${prefix}`, 'utf8'), 16)).toString('hex')
      return new TicketSealKey(key, id)
    } finally {
      seed.fill(0)
    }
  }

  /** Seals 48 ticket-key bytes bound to `binding`. */
  seal(keys: Buffer, binding: TicketKeyBinding): SealedTicketKeys {
    if (keys.length !== TICKET_KEY_BYTES) throw new RangeError(`ticket keys must be ${TICKET_KEY_BYTES} bytes`)
    const nonce = randomBytes(NONCE_BYTES)
    const meta = { v: 1 as const, created_at: binding.createdAt, crl_sha256: binding.crlSha256, seal_id: this.id }
    const cipher = createCipheriv('aes-256-gcm', this.#key, nonce, { authTagLength: TAG_BYTES })
    cipher.setAAD(associatedData(meta))
    const sealed = Buffer.concat([cipher.update(keys), cipher.final(), cipher.getAuthTag()])
    return sealedTicketKeysSchema.parse({ ...meta, nonce: nonce.toString('base64'), sealed: sealed.toString('base64') })
  }

  /**
   * Opens a record read from etcd (unparsed JSON): the keys and their binding, or why not. A record
   * sealed under another seal key (`other_seal_key`) is told apart from one that does not open
   * (`tampered`: it was changed, or forged without the key) and from one that is not a record at all.
   */
  open(raw: unknown): { readonly keys: Buffer; readonly binding: TicketKeyBinding } | { readonly problem: 'malformed' | 'other_seal_key' | 'tampered'; readonly detail: string } {
    const parsed = sealedTicketKeysSchema.safeParse(raw)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!
      return { problem: 'malformed', detail: `${issue.path.join('.') || '(record)'}: ${issue.message}` }
    }
    const r = parsed.data
    if (r.seal_id !== this.id) return { problem: 'other_seal_key', detail: `sealed under seal key ${r.seal_id}, this replica's is ${this.id} (are the plan keys the same?)` }
    const sealed = Buffer.from(r.sealed, 'base64')
    const decipher = createDecipheriv('aes-256-gcm', this.#key, Buffer.from(r.nonce, 'base64'), { authTagLength: TAG_BYTES })
    decipher.setAAD(associatedData(r))
    decipher.setAuthTag(sealed.subarray(TICKET_KEY_BYTES))
    try {
      const keys = Buffer.concat([decipher.update(sealed.subarray(0, TICKET_KEY_BYTES)), decipher.final()])
      return { keys, binding: { createdAt: r.created_at, crlSha256: r.crl_sha256 } }
    } catch {
      return { problem: 'tampered', detail: 'the sealed keys do not open under this seal key: the record was changed or forged' }
    }
  }
}

/** The bound metadata, in one fixed encoding. */
function associatedData(meta: Pick<SealedTicketKeys, 'v' | 'created_at' | 'crl_sha256' | 'seal_id'>): Buffer {
  return Buffer.from(`pxe-ticket-keys\0${meta.v}\0${meta.created_at}\0${meta.crl_sha256}\0${meta.seal_id}`, 'latin1')
}
