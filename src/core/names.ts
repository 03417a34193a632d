/**
 * The one name rule (SPEC "Identity") for node IDs and operator names, used by the HTTP layer,
 * the certificate checks, the PKI CLI and every file name derived from a name.
 */
import { z } from 'zod'

export const NAME_MAX_LENGTH = 64

// First character a letter or digit, so no name can be `.`/`..` or look like a CLI flag.
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/

/** Why `value` breaks the name rule, or null when it is a valid name. */
export function nameProblem(value: unknown): string | null {
  if (typeof value !== 'string') return 'must be a string'
  if (value.length === 0) return 'must not be empty'
  if (value.length > NAME_MAX_LENGTH) return `must be at most ${NAME_MAX_LENGTH} characters (got ${value.length})`
  if (!/^[A-Za-z0-9]/.test(value)) return 'must start with an ASCII letter or digit'
  if (!NAME_PATTERN.test(value)) return 'may contain only ASCII letters, digits, "-", "_" and "."'
  return null
}

/** True when `value` passes the name rule. */
export function isValidName(value: unknown): value is string {
  return typeof value === 'string' && NAME_PATTERN.test(value)
}

/** Thrown by assertValidName; carries the offending value only in sanitized form. */
export class InvalidNameError extends Error {
  constructor(readonly what: string, readonly problem: string) {
    super(`invalid ${what}: ${problem}`)
    this.name = 'InvalidNameError'
  }
}

/** Returns `value` when it is a valid name, else throws InvalidNameError. */
export function assertValidName(value: unknown, what = 'name'): string {
  const problem = nameProblem(value)
  if (problem !== null) throw new InvalidNameError(what, problem)
  return value as string
}

/** zod schema for a name, for request bodies, params and files read back. */
export const nameSchema = z.string().refine(isValidName, {
  message: 'must be 1-64 characters of A-Z a-z 0-9 - _ . starting with a letter or digit',
})
