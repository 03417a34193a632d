/**
 * Sealing of enrollment proofs at rest (the state directory, or etcd with HA): AES-256-GCM under a key
 * derived from the plan-signing private key, the one secret every replica shares anyway and never writes
 * to etcd (as server/ticket-key-seal.ts does for the TLS ticket keys), with the request id as associated
 * data, so a sealed proof cannot be moved to another request. A proof is no secret's equal (it proves one
 * CSR, whose key the node keeps), but SPEC keeps proofs out of every file and log: a reader of the state
 * sees only ciphertext.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes, type KeyObject } from 'node:crypto'
import type { ProofSealer } from '../core/enroll-record.js'

const SALT = Buffer.from('discord-pxe enroll-proof seal v1', 'latin1')
const NONCE_BYTES = 12
const TAG_BYTES = 16

/** The sealer of one deployment (`scope`: the HA prefix, or "file"). */
export class ProofSeal implements ProofSealer {
  readonly #key: Buffer

  private constructor(key: Buffer) {
    this.#key = key
  }

  /** Derives the key from the Ed25519 plan-signing private key. */
  static derive(planPrivateKey: KeyObject, scope: string): ProofSeal {
    if (planPrivateKey.asymmetricKeyType !== 'ed25519') throw new TypeError('the proof seal is derived from an Ed25519 plan-signing key')
    const d = planPrivateKey.export({ format: 'jwk' }).d
    if (typeof d !== 'string') throw new TypeError('the plan-signing key has no private part')
    const seed = Buffer.from(d, 'base64url')
    try {
      return new ProofSeal(Buffer.from(hkdfSync('sha256', seed, SALT, Buffer.from(`proof\0${scope}`, 'utf8'), 32)))
    } finally {
      seed.fill(0)
    }
  }

  seal(requestId: string, proof: string): string {
    const nonce = randomBytes(NONCE_BYTES)
    const cipher = createCipheriv('aes-256-gcm', this.#key, nonce, { authTagLength: TAG_BYTES })
    cipher.setAAD(Buffer.from(`pxe-enroll-proof\0${requestId}`, 'utf8'))
    return Buffer.concat([nonce, cipher.update(proof, 'utf8'), cipher.final(), cipher.getAuthTag()]).toString('base64url')
  }

  open(requestId: string, sealed: string): string | null {
    const bytes = Buffer.from(sealed, 'base64url')
    if (bytes.length <= NONCE_BYTES + TAG_BYTES) return null
    const decipher = createDecipheriv('aes-256-gcm', this.#key, bytes.subarray(0, NONCE_BYTES), { authTagLength: TAG_BYTES })
    decipher.setAAD(Buffer.from(`pxe-enroll-proof\0${requestId}`, 'utf8'))
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES))
    try {
      return Buffer.concat([decipher.update(bytes.subarray(NONCE_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8')
    } catch {
      return null
    }
  }
}
