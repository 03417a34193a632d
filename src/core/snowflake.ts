/** Discord guild IDs (snowflakes) to shards, exactly, with BigInt (SPEC "Guild routing"). */
import { AppError } from '../errors.js'

const MAX_SNOWFLAKE = (1n << 64n) - 1n
// Canonical decimal: no sign, no leading zero except "0" itself, at most 20 digits before the range check.
const CANONICAL_DECIMAL = /^(?:0|[1-9][0-9]{0,19})$/

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
