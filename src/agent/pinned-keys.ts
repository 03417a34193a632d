/**
 * The plan keys a node trusts: the JWKS pinned in its bundle (`plan-jwks.json`), never a key learned
 * from the network. Each key is imported once, so that verifying a plan costs one signature check.
 */
import { calculateJwkThumbprint, importJWK, type CryptoKey } from 'jose'
import { z } from 'zod'

/** One public Ed25519 plan key as `pxe-pki` publishes it. */
export const planPublicJwkSchema = z
  .object({
    kty: z.literal('OKP'),
    crv: z.literal('Ed25519'),
    x: z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'must be a 32-byte base64url value'),
    kid: z.string().min(1).max(128),
    alg: z.literal('EdDSA').optional(),
    use: z.literal('sig').optional(),
  })
  .strict()

/** The pinned JWKS (`plan-jwks.json`): the current key and, during a rotation, the previous one. */
export const planJwksSchema = z.object({ keys: z.array(planPublicJwkSchema).min(1).max(8) }).strict()

/** A parsed pinned JWKS. */
export type PlanJwks = z.infer<typeof planJwksSchema>

/** Thrown when a JWKS cannot be pinned; the message says why. */
export class PinnedKeysError extends Error {
  override readonly name = 'PinnedKeysError'
}

/** Imported pinned keys by kid. Immutable; one instance may be shared by many agents. */
export class PinnedKeys {
  private constructor(private readonly byKid: ReadonlyMap<string, CryptoKey>, private readonly source: PlanJwks) {}

  /** Validates a JWKS (shape, kid = RFC 7638 thumbprint, no duplicates) and imports its keys. */
  static async fromJwks(raw: unknown, source = 'plan JWKS'): Promise<PinnedKeys> {
    const parsed = planJwksSchema.safeParse(raw)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw new PinnedKeysError(`${source}: not a plan JWKS (${issue?.path.join('.') || 'root'}: ${issue?.message ?? 'invalid'})`)
    }
    const byKid = new Map<string, CryptoKey>()
    for (const jwk of parsed.data.keys) {
      const thumbprint = await calculateJwkThumbprint({ kty: jwk.kty, crv: jwk.crv, x: jwk.x }, 'sha256')
      if (thumbprint !== jwk.kid) throw new PinnedKeysError(`${source}: key ${jwk.kid.slice(0, 64)} has a kid that is not its RFC 7638 thumbprint`)
      if (byKid.has(jwk.kid)) throw new PinnedKeysError(`${source}: key ${jwk.kid} appears twice`)
      byKid.set(jwk.kid, (await importJWK({ kty: jwk.kty, crv: jwk.crv, x: jwk.x }, 'EdDSA')) as CryptoKey)
    }
    return new PinnedKeys(byKid, parsed.data)
  }

  /** The JWKS these keys came from (public keys only), e.g. to keep them beside an enrolled identity. */
  get jwks(): PlanJwks {
    return this.source
  }

  /** The key pinned under `kid`, or undefined. */
  get(kid: string): CryptoKey | undefined {
    return this.byKid.get(kid)
  }

  /** The pinned key IDs. */
  get kids(): string[] {
    return [...this.byKid.keys()]
  }
}
