import t from 'tap'
import { checkinBodySchema, drainBodySchema, identifyBodySchema } from '../../src/core/schemas.js'

const checkin = { node_id: 'compaq-01', capacity: 16, ready_shards: 8, starting_shards: 2, backoff_shards: 1, fatal_shards: 0 }

t.test('valid bodies parse to themselves', async (t) => {
  t.same(checkinBodySchema.parse(checkin), checkin)
  t.same(checkinBodySchema.parse({ ...checkin, generation: 6 }), { ...checkin, generation: 6 })
  t.same(checkinBodySchema.parse({ ...checkin, capacity: 128, ready_shards: 128, generation: 0 }).capacity, 128)
  t.same(identifyBodySchema.parse({ node_id: 'a', shard_id: 65535 }), { node_id: 'a', shard_id: 65535 })
  t.same(drainBodySchema.parse({ draining: false }), { draining: false })
})

const badCheckins: [string, unknown][] = [
  ['unknown field', { ...checkin, extra: 1 }],
  ['capacity 0', { ...checkin, capacity: 0 }],
  ['capacity 129', { ...checkin, capacity: 129 }],
  ['negative count', { ...checkin, ready_shards: -1 }],
  ['count 129', { ...checkin, fatal_shards: 129 }],
  ['fraction', { ...checkin, capacity: 1.5 }],
  ['fractional count', { ...checkin, starting_shards: 0.5 }],
  ['string number', { ...checkin, capacity: '16' }],
  ['string count', { ...checkin, backoff_shards: '1' }],
  ['negative generation', { ...checkin, generation: -1 }],
  ['fractional generation', { ...checkin, generation: 1.5 }],
  ['string generation', { ...checkin, generation: '6' }],
  ['null generation', { ...checkin, generation: null }],
  ['unsafe generation', { ...checkin, generation: 2 ** 53 }],
  ['bad node id', { ...checkin, node_id: '../evil' }],
  ['numeric node id', { ...checkin, node_id: 7 }],
  ['boolean capacity', { ...checkin, capacity: true }],
  ['Infinity', { ...checkin, capacity: Infinity }],
  ['NaN', { ...checkin, capacity: NaN }],
  ['array', [checkin]],
  ['null', null],
  ...(['node_id', 'capacity', 'ready_shards', 'starting_shards', 'backoff_shards', 'fatal_shards'] as const).map(
    (key): [string, unknown] => {
      const { [key]: _dropped, ...rest } = checkin
      return [`missing ${key}`, rest]
    },
  ),
]

t.test('bad check-in bodies are refused', async (t) => {
  for (const [label, value] of badCheckins) t.notOk(checkinBodySchema.safeParse(value).success, label)
})

t.test('bad identify bodies are refused', async (t) => {
  const bad: [string, unknown][] = [
    ['unknown field', { node_id: 'a', shard_id: 1, bucket: 1 }],
    ['negative shard', { node_id: 'a', shard_id: -1 }],
    ['shard 65536', { node_id: 'a', shard_id: 65536 }],
    ['fraction', { node_id: 'a', shard_id: 1.5 }],
    ['string number', { node_id: 'a', shard_id: '1' }],
    ['missing shard', { node_id: 'a' }],
    ['missing node', { shard_id: 1 }],
    ['bad node id', { node_id: '-x', shard_id: 1 }],
  ]
  for (const [label, value] of bad) t.notOk(identifyBodySchema.safeParse(value).success, label)
})

t.test('bad drain bodies are refused', async (t) => {
  for (const value of [{}, { draining: 'true' }, { draining: 1 }, { draining: true, node_id: 'a' }, null]) {
    t.notOk(drainBodySchema.safeParse(value).success, JSON.stringify(value))
  }
})
