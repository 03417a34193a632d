import t from 'tap'
import { AppError } from '../../src/errors.js'
import { commonGuild, parseGuildId, shardForGuild, shareGuilds } from '../../src/core/snowflake.js'
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

t.test('two sessions share a guild exactly when their shards agree modulo gcd of their counts', async (t) => {
  t.ok(shareGuilds(0, 16, 16, 32), 'shard 0/16 and 16/32 (guild 16 << 22)')
  t.equal(commonGuild(0, 16, 16, 32), 16)
  t.notOk(shareGuilds(1, 16, 16, 32), '1/16 and 16/32 never meet')
  t.ok(shareGuilds(5, 64, 5, 64) && !shareGuilds(5, 64, 6, 64), 'same count: same shard only')
  t.ok(shareGuilds(2, 3, 3, 4), 'coprime counts always meet')
  // Brute force over small counts: the rule equals "some x with x % a = i and x % b = j".
  for (const [a, b] of [[4, 6], [6, 9], [5, 10], [12, 8]] as const) {
    for (let i = 0; i < a; i++) for (let j = 0; j < b; j++) {
      let meets = false
      for (let x = 0; x < a * b && !meets; x++) meets = x % a === i && x % b === j
      if (meets !== shareGuilds(i, a, j, b)) t.fail(`${i}/${a} and ${j}/${b}`)
      const g = commonGuild(i, a, j, b)
      if (g !== null && (shardForGuild(BigInt(g) << 22n, a) !== i || shardForGuild(BigInt(g) << 22n, b) !== j)) t.fail(`guild for ${i}/${a} ${j}/${b}`)
      if ((g !== null) !== meets) t.fail(`witness for ${i}/${a} ${j}/${b}`)
    }
  }
})
