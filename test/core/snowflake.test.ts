import t from 'tap'
import { AppError } from '../../src/errors.js'
import { parseGuildId, shardForGuild } from '../../src/core/snowflake.js'
import { controllerWith, T0 } from './fixtures.js'

const ids = ['0', '4194303', '4194304', '175928847299117063', '18446744073709551615']

t.test('guild ids map to (id >> 22) % S, exactly', async (t) => {
  for (const raw of ids) {
    for (const shards of [1, 7, 64, 65536]) {
      const expected = Number((BigInt(raw) >> 22n) % BigInt(shards))
      t.equal(parseGuildId(raw), BigInt(raw), raw)
      t.equal(shardForGuild(parseGuildId(raw), shards), expected, `${raw} over ${shards}`)
    }
  }
  // Spot values, worked by hand: 4194303 is the last id of shard 0, 4194304 the first of shard 1.
  t.equal(shardForGuild(4194303n, 64), 0)
  t.equal(shardForGuild(4194304n, 64), 1)
  t.equal(shardForGuild(18446744073709551615n, 65536), 65535)
})

t.test('malformed guild ids are refused with invalid_request', async (t) => {
  for (const raw of ['-1', '+1', '007', '00', '1e3', '18446744073709551616', '99999999999999999999', 'abc', '', ' 1', '1 ', '1.0', '0x10', '１']) {
    t.throws(() => parseGuildId(raw), { code: 'invalid_request' }, JSON.stringify(raw))
    t.throws(() => parseGuildId(raw), AppError)
  }
})

t.test('route echoes the id and names the owner in the current plan', async (t) => {
  const controller = controllerWith([['compaq-01', 16], ['compaq-02', 16], ['dell-01', 32]])
  // Three joins, three new mappings: generation 3.
  const owners = ['compaq-01', 'compaq-01', 'compaq-02', 'dell-01']
  for (const raw of ids) {
    const shardId = Number((BigInt(raw) >> 22n) % 64n)
    const route = controller.route(T0, raw)
    t.same(route, { guildId: raw, shardId, nodeId: owners[Math.floor(shardId / 16)], generation: 3 })
  }
  t.throws(() => controller.route(0, '007'), { code: 'invalid_request' })
})
