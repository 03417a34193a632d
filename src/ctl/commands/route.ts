/** `pxe-ctl route GUILD_ID`: which shard and node serve a guild (SPEC "Guild routing"). */
import type { CommandSpec } from '../command.js'
import { UsageError, shown } from '../errors.js'
import { emit } from '../output.js'
import { renderPairs } from '../table.js'

const CANONICAL_DECIMAL = /^(?:0|[1-9][0-9]{0,19})$/
const MAX_SNOWFLAKE = (1n << 64n) - 1n

export const route: CommandSpec = {
  words: 'route',
  usage: 'GUILD_ID',
  summary: 'the shard and the node that serve a guild',
  details: `GUILD_ID is a Discord snowflake in canonical decimal (digits only, no leading zero, at most 2^64 - 1).
Reads GET /v1/route/GUILD_ID: shard = (GUILD_ID >> 22) % total_shards, and the node that holds it now.

Example:
  $ pxe-ctl route 81384788765712384
  guild       81384788765712384
  shard       19
  node        compaq-02
  generation  12`,
  args: ['GUILD_ID'],
  flags: [],
  async run(ctx, parsed) {
    const guildId = parsed.positionals[0]!
    if (!CANONICAL_DECIMAL.test(guildId) || BigInt(guildId) > MAX_SNOWFLAKE) {
      throw new UsageError(`GUILD_ID ${shown(guildId, 32)} must be a canonical decimal snowflake (digits only, no leading zero, at most 2^64 - 1)`, 'route')
    }
    const answer = await (await ctx.api()).route(guildId)
    const r = answer.value
    emit(ctx, answer.raw, () =>
      renderPairs([
        ['guild', r.guild_id],
        ['shard', String(r.shard_id)],
        ['node', r.node_id ?? 'none (the shard is unassigned)'],
        ['generation', String(r.generation)],
      ]),
    )
  },
}
