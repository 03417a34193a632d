/**
 * What Discord counts toward its ban of an address (10,000 invalid requests in 10 minutes): 401, 403,
 * and 429 — except a 429 with `X-RateLimit-Scope: shared`, a shared resource's limit that Discord
 * does not hold against the bot.
 */
export const INVALID_WINDOW_MS = 600_000

/** True when a response with this status (and X-RateLimit-Scope header, or null) counts as invalid. */
export function isInvalidResponse(status: number, scope: string | null): boolean {
  if (status === 401 || status === 403) return true
  return status === 429 && scope?.trim().toLowerCase() !== 'shared'
}
