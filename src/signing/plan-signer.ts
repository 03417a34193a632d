/**
 * Signs plans as compact JWS (EdDSA, typ pxe-plan+jwt) with the plan key in force. The signature is made
 * synchronously with node:crypto on a KeyObject made once (at start and on rotation), and the protected
 * header segment is encoded once: jose's sign runs through WebCrypto, an async job on libuv's thread pool
 * per plan, which cost more CPU than the rest of a check-in. jose stays the format's reference: the JWKS
 * and thumbprints come from it, and the tests verify what this signer makes with jose.
 */
import { sign } from 'node:crypto'
import type { PlanKeys } from './plan-keys.js'

/** The claims of a signed plan (SPEC "Signed plans"); the same values as the plain check-in fields. */
export interface PlanClaims {
  readonly iss: string
  readonly sub: string
  readonly iat: number
  readonly exp: number
  readonly generation: number
  readonly total_shards: number
  readonly range_start: number
  readonly range_count: number
  readonly assigned: readonly number[]
  readonly lease_seconds: number
  readonly max_concurrency: number
  /** A live reshard's next set (SPEC "Live resharding"); absent without one. */
  readonly next?: { readonly total_shards: number; readonly range_start: number; readonly range_count: number; readonly assigned: readonly number[] }
  /** The node's REST share (SPEC "REST budget"); absent when the controller shares none. */
  readonly rest?: { readonly per_second: number; readonly invalid_budget: number; readonly until: string }
}

export const PLAN_JWS_TYPE = 'pxe-plan+jwt'

/**
 * Holds the signing key and the encoded protected header of the key in force. A plan-key rotation is
 * a restart with the rotated plan-keys.json: plans signed before stay valid under the JWKS it publishes.
 */
export class PlanSigner {
  private readonly keys: PlanKeys
  private readonly headerSegment: string

  constructor(keys: PlanKeys) {
    if (keys.privateKey.asymmetricKeyType !== 'ed25519') throw new TypeError('plan keys must be Ed25519')
    this.keys = keys
    this.headerSegment = Buffer.from(JSON.stringify({ alg: 'EdDSA', typ: PLAN_JWS_TYPE, kid: keys.kid })).toString('base64url')
  }

  /** The JWKS to publish (current key and, during a rotation, the previous one). */
  get jwks(): PlanKeys['jwks'] {
    return this.keys.jwks
  }

  /** The kid of the key in force. */
  get kid(): string {
    return this.keys.kid
  }

  /** Signs a payload already serialized as JSON (the hot path serializes the claims once for both uses). */
  signPayload(payloadJson: string): string {
    const input = `${this.headerSegment}.${Buffer.from(payloadJson, 'utf8').toString('base64url')}`
    const signature = sign(null, Buffer.from(input, 'latin1'), this.keys.privateKey) // Ed25519: no digest parameter
    return `${input}.${signature.toString('base64url')}`
  }
}
