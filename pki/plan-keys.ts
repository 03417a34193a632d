/**
 * Ed25519 plan keys: `plan-keys.json` (private, read by the controller) and `plan-jwks.json` (public,
 * shipped in bundles). The file holds the current key and at most the previous one.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto'
import { calculateJwkThumbprint } from 'jose'
import { z } from 'zod'

const privateJwkSchema = z.object({
  kty: z.literal('OKP'),
  crv: z.literal('Ed25519'),
  x: z.string().min(1),
  d: z.string().min(1),
  kid: z.string().min(1),
  alg: z.literal('EdDSA'),
  use: z.literal('sig'),
}).strict()
/** One private plan key as stored in plan-keys.json. */
export type PlanPrivateJwk = z.infer<typeof privateJwkSchema>

/** zod schema of plan-keys.json (the one format: the toolkit writes it, the controller reads it). */
export const planKeysFileSchema = z
  .object({ current: z.string().min(1), keys: z.array(privateJwkSchema).min(1).max(2) })
  .strict()
  .refine((file) => file.keys.some((k) => k.kid === file.current), { message: 'current must be the kid of one of the keys' })
export type PlanKeysFile = z.infer<typeof planKeysFileSchema>

/** One public plan key as published in plan-jwks.json. */
export interface PlanPublicJwk {
  readonly kty: 'OKP'
  readonly crv: 'Ed25519'
  readonly x: string
  readonly kid: string
  readonly alg: 'EdDSA'
  readonly use: 'sig'
}

/** A new Ed25519 key as a private JWK whose kid is its RFC 7638 thumbprint (SHA-256). */
export async function newPlanKey(): Promise<PlanPrivateJwk> {
  const { privateKey } = generateKeyPairSync('ed25519')
  const jwk = privateKey.export({ format: 'jwk' })
  if (typeof jwk.x !== 'string' || typeof jwk.d !== 'string') throw new Error('Ed25519 JWK export is missing x or d')
  const kid = await calculateJwkThumbprint({ kty: 'OKP', crv: 'Ed25519', x: jwk.x }, 'sha256')
  return { kty: 'OKP', crv: 'Ed25519', x: jwk.x, d: jwk.d, kid, alg: 'EdDSA', use: 'sig' }
}

/** True when `x` is the public key of `d`: Node signs with `d` alone, so a wrong `x` (and kid) would publish a key that verifies nothing. */
export function planKeyPairMatches(jwk: PlanPrivateJwk): boolean {
  try {
    const privateKey = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x, d: jwk.d }, format: 'jwk' })
    return createPublicKey(privateKey).export({ format: 'jwk' }).x === jwk.x // public values: no constant-time compare needed
  } catch {
    return false // a `d` that is no Ed25519 private key
  }
}

/** The sentence refusing the first key of `file` whose `x` does not belong to its `d`, or null when all match. */
export function planKeyPairProblem(file: PlanKeysFile, source: string): string | null {
  const bad = file.keys.find((k) => !planKeyPairMatches(k))
  return bad === undefined ? null : `${source}: key ${bad.kid}: its public "x" is not the public key of its private "d" (the file is damaged or was edited)`
}

/** The file after a rotation: the new key is current, the previous current key stays, older ones go. */
export function rotatedPlanKeys(previous: PlanKeysFile | null, fresh: PlanPrivateJwk): PlanKeysFile {
  const keep = previous?.keys.find((k) => k.kid === previous.current)
  return { current: fresh.kid, keys: keep === undefined ? [fresh] : [fresh, keep] }
}

/** The public JWKS of a plan-keys file (the `d` member never leaves). */
export function publicJwks(file: PlanKeysFile): { keys: PlanPublicJwk[] } {
  return { keys: file.keys.map(({ kty, crv, x, kid, alg, use }) => ({ kty, crv, x, kid, alg, use })) }
}
