/**
 * The emulated bot's guilds: `guildCount` snowflakes whose `guild_id >> 22` are consecutive integers,
 * so they spread evenly over any shard count (Discord's formula, `(guild_id >> 22) % num_shards`,
 * through the product's own `shardForGuild`).
 */
import { commonGuild, shardForGuild, shareGuilds } from '../../../src/core/snowflake.js'

// A plausible timestamp part (about three years after Discord's epoch); the low bits are arbitrary.
const FIRST_TIMESTAMP = 100_000_000_000n

/** The guilds, as decimal snowflake strings, with the shard lookups a gateway needs. */
export class GuildLayout {
  readonly ids: readonly bigint[]

  constructor(guildCount: number) {
    const ids: bigint[] = []
    for (let i = 0; i < guildCount; i++) ids.push(((FIRST_TIMESTAMP + BigInt(i)) << 22n) | BigInt(i % 4096))
    this.ids = ids
  }

  /** The guild IDs shard `shardId` of `numShards` serves. */
  ofShard(shardId: number, numShards: number): string[] {
    return this.ids.filter((id) => shardForGuild(id, numShards) === shardId).map(String)
  }

  /** How many guilds the shard would hold (what 4011 "sharding required" is judged on). */
  countOfShard(shardId: number, numShards: number): number {
    let count = 0
    for (const id of this.ids) if (shardForGuild(id, numShards) === shardId) count++
    return count
  }

  /** How many of these guilds both shards serve. */
  commonCount(a: number, countA: number, b: number, countB: number): number {
    let count = 0
    for (const id of this.ids) if (shardForGuild(id, countA) === a && shardForGuild(id, countB) === b) count++
    return count
  }
}

/** The smallest guild ID two shards of different counts both serve, or null when they share none. */
export function witnessGuildId(a: number, countA: number, b: number, countB: number): string | null {
  if (!shareGuilds(a, countA, b, countB)) return null
  const x = commonGuild(a, countA, b, countB)
  return x === null ? null : String(BigInt(x) << 22n)
}
