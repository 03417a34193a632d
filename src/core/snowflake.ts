/** Discord guild IDs (snowflakes) to shards, exactly, with BigInt (SPEC "Guild routing"). */
import { AppError } from '../errors.js'

const MAX_SNOWFLAKE = (1n << 64n) - 1n
// Canonical decimal: no sign, no leading zero except "0" itself, at most 20 digits before the range check.
export const CANONICAL_DECIMAL = /^(?:0|[1-9][0-9]{0,19})$/

/** Parses a canonical decimal guild ID in 0..2^64-1; anything else throws AppError invalid_request. */
export function parseGuildId(raw: string): bigint {
  if (typeof raw !== 'string' || !CANONICAL_DECIMAL.test(raw)) {
    const rule = 'digits only, no sign, no leading zero'
    throw new AppError('invalid_request', `guild_id must be a canonical decimal snowflake (${rule})`)
  }
  const id = BigInt(raw)
  if (id > MAX_SNOWFLAKE) throw new AppError('invalid_request', 'guild_id must be at most 2^64 - 1')
  return id
}

/** Discord's shard formula: (guild_id >> 22) % total_shards. */
export function shardForGuild(guildId: bigint, totalShards: number): number {
  return Number((guildId >> 22n) % BigInt(totalShards))
}

/** Greatest common divisor of two positive integers. */
export function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b]
  return a
}

/**
 * True when some guild is served both by shard `a` of a session with `countA` shards and by shard `b` of
 * one with `countB`: by the Chinese remainder theorem exactly when a ≡ b (mod gcd(countA, countB)), since
 * guild_id >> 22 spans 2^42 values, more than lcm(countA, countB) for any two counts up to 65,536.
 */
export function shareGuilds(a: number, countA: number, b: number, countB: number): boolean {
  return (a - b) % gcd(countA, countB) === 0
}

/** The smallest `guild_id >> 22` served by both sessions (the witness a finding names), or null when none. */
export function commonGuild(a: number, countA: number, b: number, countB: number): number | null {
  if (!shareGuilds(a, countA, b, countB)) return null
  // x = a + k·countA for k < countB / gcd: at most 65,536 steps, and only for a finding.
  const steps = countB / gcd(countA, countB)
  for (let k = 0, x = a; k < steps; k++, x += countA) if (x % countB === b) return x
  return null
}
