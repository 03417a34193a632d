/**
 * Bootstrap tokens and enrollment proofs (SPEC "Device enrollment and renewal"), shared by the CA host
 * (pxe-pki token, the signer) and the node (pxe-node --enroll). A token is `pxe1.<id>.<secret>`: the id
 * names it in requests and logs; the secret never leaves the CA host and the node, and the controller never
 * sees it: a node proves it holds the token with an HMAC over its CSR, which only the signer can check.
 * Pure: making a token's random parts is the caller's.
 */
import { createHmac, timingSafeEqual } from 'node:crypto'
import { NAME_MAX_LENGTH } from './names.js'

export const TOKEN_PREFIX = 'pxe1'
/** 10 characters of base32 (RFC 4648's alphabet, lower case). */
export const TOKEN_ID_PATTERN = /^[a-z2-7]{10}$/
/** The secret: 32 bytes, base64url without padding (43 characters). */
export const TOKEN_SECRET_BYTES = 32
const SECRET_TEXT = /^[A-Za-z0-9_-]{43}$/
const PROOF_TEXT = /^[A-Za-z0-9_-]{43}$/
/** What an enrollment proof's HMAC covers before the CSR's DER (a proof is good for this use only). */
const PROOF_CONTEXT = Buffer.from('pxe-enroll-v1\n', 'ascii')
/** A name pattern: the name rule's characters and `*` (any run of them), at most as long as a name. */
const NAME_GLOB = /^[A-Za-z0-9*][A-Za-z0-9._*-]*$/

/** A token as the node and the signer hold it. */
export interface EnrollToken {
  readonly id: string
  readonly secret: Buffer
}

/** Why `text` is not a token, or null (never repeats the text: it may be a secret). */
export function tokenProblem(text: string): string | null {
  const parts = text.trim().split('.')
  if (parts.length !== 3 || parts[0] !== TOKEN_PREFIX) return `a token has the form ${TOKEN_PREFIX}.<id>.<secret>`
  if (!TOKEN_ID_PATTERN.test(parts[1]!)) return 'the token id is not 10 characters of base32 (a-z, 2-7)'
  if (!SECRET_TEXT.test(parts[2]!)) return 'the token secret is not 43 characters of base64url'
  return null
}

/** Parses `pxe1.<id>.<secret>` (surrounding white space, as in a file, is ignored); throws a message without the text. */
export function parseToken(text: string): EnrollToken {
  const problem = tokenProblem(text)
  if (problem !== null) throw new TypeError(problem)
  const [, id, secret] = text.trim().split('.')
  return { id: id!, secret: Buffer.from(secret!, 'base64url') }
}

/** The token's one printable form. */
export function formatToken(token: EnrollToken): string {
  if (!TOKEN_ID_PATTERN.test(token.id) || token.secret.length !== TOKEN_SECRET_BYTES) throw new TypeError('not a token')
  return `${TOKEN_PREFIX}.${token.id}.${token.secret.toString('base64url')}`
}

/** A token id from 50 random bits (the caller's randomness): 10 characters of base32. */
export function tokenIdFromBytes(random: Uint8Array): string {
  if (random.length < 7) throw new TypeError('a token id takes 7 random bytes')
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567'
  let bits = 0n
  for (const byte of random.subarray(0, 7)) bits = (bits << 8n) | BigInt(byte)
  let id = ''
  for (let i = 0; i < 10; i++) id += alphabet[Number((bits >> BigInt(51 - 5 * i)) & 31n)]
  return id
}

/** base64url(HMAC-SHA256(secret, "pxe-enroll-v1\n" || csrDer)). */
export function enrollProof(secret: Buffer, csrDer: Buffer): string {
  return createHmac('sha256', secret).update(PROOF_CONTEXT).update(csrDer).digest('base64url')
}

/** True when `proof` is the proof of `csrDer` under `secret`; compared in constant time. */
export function proofMatches(secret: Buffer, csrDer: Buffer, proof: string): boolean {
  if (!PROOF_TEXT.test(proof)) return false
  const expected = createHmac('sha256', secret).update(PROOF_CONTEXT).update(csrDer).digest()
  const given = Buffer.from(proof, 'base64url')
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/** True when `proof` has the shape of a proof (the controller checks no more: it never has the secret). */
export function isProofShaped(proof: string): boolean {
  return PROOF_TEXT.test(proof)
}

/** Why `pattern` is not a name pattern, or null. */
export function namePatternProblem(pattern: string): string | null {
  if (pattern.length === 0) return 'must not be empty'
  if (pattern.length > NAME_MAX_LENGTH) return `must be at most ${NAME_MAX_LENGTH} characters`
  if (!NAME_GLOB.test(pattern)) return 'may contain only ASCII letters, digits, "-", "_", "." and "*", and start with a letter, a digit or "*"'
  return null
}

/** True when `name` matches the glob `pattern` (`*`: any run of characters, possibly none). Linear time. */
export function nameMatchesPattern(pattern: string, name: string): boolean {
  // The classic two-pointer glob: backtracks only to the last `*`, so no pattern can make it slow.
  let p = 0
  let n = 0
  let star = -1
  let mark = 0
  while (n < name.length) {
    if (p < pattern.length && pattern[p] !== '*' && pattern[p] === name[n]) {
      p += 1
      n += 1
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p
      mark = n
      p += 1
    } else if (star !== -1) {
      p = star + 1
      mark += 1
      n = mark
    } else return false
  }
  while (p < pattern.length && pattern[p] === '*') p += 1
  return p === pattern.length
}
