/** Signs plans as compact JWS (EdDSA, typ pxe-plan+jwt) with the plan key in force. */
import { CompactSign } from 'jose'
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
}

export const PLAN_JWS_TYPE = 'pxe-plan+jwt'

const encoder = new TextEncoder()

/** Holds the key object once (creating it per request would cost more than the signature). */
export class PlanSigner {
  private readonly header: { alg: 'EdDSA'; typ: string; kid: string }

  constructor(private readonly keys: PlanKeys) {
    this.header = { alg: 'EdDSA', typ: PLAN_JWS_TYPE, kid: keys.kid }
  }

  /** The JWKS to publish (current key and, during a rotation, the previous one). */
  get jwks(): PlanKeys['jwks'] {
    return this.keys.jwks
  }

  /** Signs the claims and returns the compact serialization. */
  async sign(claims: PlanClaims): Promise<string> {
    return new CompactSign(encoder.encode(JSON.stringify(claims))).setProtectedHeader(this.header).sign(this.keys.privateKey)
  }
}
