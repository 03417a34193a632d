/** zod at the boundary: parse or throw a 400 naming the first problem. */
import type { z } from 'zod'
import { AppError } from '../errors.js'

/** Parses `value` with `schema`, or throws AppError('invalid_request') describing what is wrong. */
export function parseOr400<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const result = schema.safeParse(value)
  if (result.success) return result.data
  const issue = result.error.issues[0]
  let detail = issue?.message ?? 'invalid'
  if (issue?.code === 'unrecognized_keys') detail = `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => JSON.stringify(k.slice(0, 40))).join(', ')}`
  const at = issue && issue.path.length > 0 ? ` at "${issue.path.join('.')}"` : ''
  throw new AppError('invalid_request', `invalid ${what}${at}: ${detail}`)
}
