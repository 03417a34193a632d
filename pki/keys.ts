/** RSA key pairs: generated natively by Node (fast), handed to node-forge only for building and signing. */
import { generateKeyPairSync, createPrivateKey, createPublicKey } from 'node:crypto'
import forge from 'node-forge'
import { UsageError } from './errors.js'

/** Key sizes accepted by `--key-bits`. */
export const ALLOWED_KEY_BITS = [2048, 3072, 4096] as const
/** Default key size of leaf certificates (node, operator, server). */
export const DEFAULT_LEAF_KEY_BITS = 2048
/** Key size of the CA. */
export const CA_KEY_BITS = 3072

/** A key pair in both forms: PKCS#8 PEM (written to disk) and forge objects (for building certificates). */
export interface RsaKeyPair {
  readonly privateKeyPem: string
  readonly privateKey: forge.pki.rsa.PrivateKey
  readonly publicKey: forge.pki.rsa.PublicKey
}

/** Checks a `--key-bits` value. */
export function checkKeyBits(bits: number): number {
  if (!(ALLOWED_KEY_BITS as readonly number[]).includes(bits)) {
    throw new UsageError(`invalid key size ${bits}: use one of ${ALLOWED_KEY_BITS.join(', ')}`)
  }
  return bits
}

/** Generates an RSA key pair with Node's crypto (native) and converts it for node-forge. */
export function generateRsaKeyPair(bits: number): RsaKeyPair {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: bits, publicExponent: 0x10001 })
  const privateKeyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
  return rsaKeyPairFromPem(privateKeyPem)
}

/** Loads a PEM private key (PKCS#8 or PKCS#1) into both forms. */
export function rsaKeyPairFromPem(pem: string): RsaKeyPair {
  const keyObject = createPrivateKey(pem)
  const pkcs8 = keyObject.export({ type: 'pkcs8', format: 'pem' }).toString()
  const privateKey = forge.pki.privateKeyFromPem(pkcs8) as forge.pki.rsa.PrivateKey
  const publicKey = forge.pki.publicKeyFromPem(createPublicKey(keyObject).export({ type: 'spki', format: 'pem' }).toString())
  return { privateKeyPem: pkcs8, privateKey, publicKey }
}
