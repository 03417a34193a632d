/**
 * Key pairs, all made and held by node:crypto: RSA or EC P-256 for leaves, RSA 3072 for the CA. Private
 * keys leave as PKCS#8 PEM (for files, mode 0600); public keys as SubjectPublicKeyInfo DER (for certificates).
 */
import { generateKeyPair } from 'node:crypto'
import { UsageError } from './errors.js'
import { printable } from './serial.js'

/** Key sizes accepted by `--key-bits`. */
export const ALLOWED_KEY_BITS = [2048, 3072, 4096] as const
/** Default key size of RSA leaf certificates (node, operator, server). */
export const DEFAULT_LEAF_KEY_BITS = 2048
/** Key size of the CA. */
export const CA_KEY_BITS = 3072
/** The one curve of generated EC keys (CSRs may also bring P-384). */
export const EC_CURVE = 'P-256'

/** Values of `--key-type`; RSA stays the default (every TLS stack a PXE image may carry speaks it). */
export const KEY_TYPES = ['rsa', 'ec'] as const
export type KeyType = (typeof KEY_TYPES)[number]

/** What key to make: RSA with a size, or EC P-256. */
export type KeySpec = { readonly type: 'rsa'; readonly bits: number } | { readonly type: 'ec' }

/** A new key pair as it is used: the private key as PKCS#8 PEM (for a 0600 file), the public key as SPKI DER. */
export interface KeyPair {
  readonly privateKeyPem: string
  readonly spkiDer: Buffer
}

const ENCODING = { publicKeyEncoding: { type: 'spki', format: 'der' }, privateKeyEncoding: { type: 'pkcs8', format: 'pem' } } as const

/** Checks `--key-type` and `--key-bits` together (bits apply to RSA only). */
export function checkKeySpec(type: string | undefined, bits: number | undefined): KeySpec {
  const keyType = type ?? 'rsa'
  if (!(KEY_TYPES as readonly string[]).includes(keyType)) throw new UsageError(`invalid --key-type "${printable(keyType)}": use rsa or ec`)
  if (keyType === 'ec') {
    if (bits !== undefined) throw new UsageError(`--key-bits applies to RSA keys only; --key-type ec always makes a ${EC_CURVE} key`)
    return { type: 'ec' }
  }
  const rsaBits = bits ?? DEFAULT_LEAF_KEY_BITS
  if (!(ALLOWED_KEY_BITS as readonly number[]).includes(rsaBits)) {
    throw new UsageError(`invalid key size ${rsaBits}: use one of ${ALLOWED_KEY_BITS.join(', ')}`)
  }
  return { type: 'rsa', bits: rsaBits }
}

/** Describes a spec for messages and the index history, e.g. "EC P-256" or "RSA 2048". */
export function describeKeySpec(spec: KeySpec): string {
  return spec.type === 'ec' ? `EC ${EC_CURVE}` : `RSA ${spec.bits}`
}

/** Generates and encodes a key pair on libuv's thread pool, so that a batch uses every core. */
export function generateKeyPairInPool(spec: KeySpec): Promise<KeyPair> {
  return new Promise((resolve, reject) => {
    const done = (err: Error | null, spkiDer: Buffer, privateKeyPem: string): void => (err === null ? resolve({ privateKeyPem, spkiDer }) : reject(err))
    if (spec.type === 'ec') generateKeyPair('ec', { namedCurve: EC_CURVE, ...ENCODING }, done)
    else generateKeyPair('rsa', { modulusLength: spec.bits, publicExponent: 0x10001, ...ENCODING }, done)
  })
}
