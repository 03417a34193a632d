/**
 * Loads the controller's Ed25519 plan keys (`plan-keys.json`, written by `pxe-pki`) and derives the
 * public JWKS that `GET /v1/keys` serves and node bundles pin.
 */
import { createPrivateKey, type KeyObject } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { calculateJwkThumbprint } from 'jose'
import { planKeyPairProblem, planKeysFileSchema, publicJwks, type PlanPublicJwk } from '../../pki/plan-keys.js'

/** The signing key in force and the public keys to publish (current first, then the previous one). */
export interface PlanKeys {
  readonly kid: string
  readonly privateKey: KeyObject
  readonly jwks: { readonly keys: readonly PlanPublicJwk[] }
}

/** Parses and checks a plan-keys document: every kid must be the RFC 7638 thumbprint of its key. */
export async function parsePlanKeys(raw: unknown, source: string): Promise<PlanKeys> {
  const parsed = planKeysFileSchema.safeParse(raw)
  if (!parsed.success) throw new Error(`${source}: not a plan-keys file (${parsed.error.issues[0]?.message ?? 'invalid'})`)
  const { current, keys } = parsed.data
  const mismatch = planKeyPairProblem(parsed.data, source)
  if (mismatch !== null) throw new Error(mismatch)
  for (const jwk of keys) {
    const thumbprint = await calculateJwkThumbprint({ kty: jwk.kty, crv: jwk.crv, x: jwk.x }, 'sha256')
    if (thumbprint !== jwk.kid) throw new Error(`${source}: key ${jwk.kid} has a kid that is not its RFC 7638 thumbprint`)
  }
  const currentJwk = keys.find((k) => k.kid === current)! // the schema guarantees `current` names a key
  const privateKey = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', x: currentJwk.x, d: currentJwk.d }, format: 'jwk' })
  // Current key first, then the previous one still published during a rotation.
  const published = publicJwks(parsed.data).keys.sort((a, b) => Number(b.kid === current) - Number(a.kid === current))
  return { kid: current, privateKey, jwks: { keys: published } }
}

/** Reads and parses `plan-keys.json`. */
export async function loadPlanKeys(path: string): Promise<PlanKeys> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (err) {
    throw new Error(`cannot read plan keys ${path}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    throw new Error(`${path}: not JSON`)
  }
  return parsePlanKeys(json, path)
}
