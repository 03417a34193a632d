import t from 'tap'
import type { Controller } from '../../src/core/controller.js'
import { body, cert, checkIn, claimAnswered, controllerWith, LEASE_MS, T0, claimAs } from './fixtures.js'

// compaq-01 owns 0..15, compaq-02 16..31, dell-01 32..63; bucket = shard % 16.
const threeNodes = () => controllerWith([['compaq-01', 16], ['compaq-02', 16], ['dell-01', 32]])
const claim = (c: Controller, now: number, nodeId: string, shardId: number) =>
  claimAnswered(c, now, { node_id: nodeId, shard_id: shardId })

t.test('one grant per bucket per interval, across nodes, with the exact wait', async (t) => {
  const c = threeNodes()
  c.drainEvents()
  t.same(claim(c, T0, 'compaq-01', 0), { granted: true, mode: 'identify', shardId: 0, bucket: 0, generation: 3 })
  t.same(c.drainEvents(), [{ kind: 'identify_granted', nodeId: 'compaq-01', shardId: 0, bucket: 0, generation: 3 }])
  t.same(claim(c, T0 + 1000, 'compaq-02', 16), { granted: false, reason: 'bucket_busy', retryAfterMs: 4100 })
  t.same(claim(c, T0 + 5099, 'dell-01', 32), { granted: false, reason: 'bucket_busy', retryAfterMs: 1 })
  t.same(c.drainEvents(), [], 'refusals record nothing')
  // The refusals did not move the bucket: the grant comes exactly one interval after the first.
  t.match(claim(c, T0 + 5100, 'dell-01', 48), { granted: true, bucket: 0 })
  t.same(claim(c, T0 + 5100, 'compaq-01', 0), { granted: false, reason: 'bucket_busy', retryAfterMs: 5100 })
})

t.test("a bucket's interval counts from the moment the grant's answer left, and it is busy until then", async (t) => {
  const c = threeNodes()
  const granted = claimAs(c, T0, { node_id: 'compaq-01', shard_id: 0 })
  t.match(granted, { granted: true, mode: 'identify', bucket: 0 })
  // The answer waits for a durable write: the bucket is busy for a whole interval from any moment before it leaves.
  t.same(claimAs(c, T0 + 5100, { node_id: 'compaq-02', shard_id: 16 }), { granted: false, reason: 'bucket_busy', retryAfterMs: 5100 }, 'not granted one interval after the decision while the answer is held')
  t.match(claim(c, T0 + 5100, 'compaq-01', 1), { granted: true, bucket: 1 }, 'other buckets go on')
  c.identifyReleased(T0 + 800, 0) // the answer left 800 ms after the decision
  t.same(claim(c, T0 + 5100, 'compaq-02', 16), { granted: false, reason: 'bucket_busy', retryAfterMs: 800 }, 'the interval counts from the release')
  t.match(claim(c, T0 + 5900, 'compaq-02', 16), { granted: true, bucket: 0 })
  c.identifyReleased(T0 + 9999, 0)
  t.same(claim(c, T0 + 11_000, 'dell-01', 32), { granted: true, mode: 'identify', shardId: 32, bucket: 0, generation: 3 }, 'a release with no grant waiting changes nothing')
})

t.test('other buckets are independent', async (t) => {
  const c = threeNodes()
  t.match(claim(c, T0, 'compaq-01', 0), { granted: true, bucket: 0 })
  t.match(claim(c, T0, 'compaq-01', 1), { granted: true, bucket: 1 })
  t.match(claim(c, T0 + 1, 'compaq-02', 31), { granted: true, bucket: 15 })
  t.match(claim(c, T0 + 2, 'dell-01', 47), { granted: false, reason: 'bucket_busy', retryAfterMs: 5099 })
})

t.test('only the owner may claim, and only a shard below total_shards', async (t) => {
  const c = threeNodes()
  t.throws(() => claim(c, T0, 'compaq-01', 16), { code: 'not_owner', message: /shard 16/ })
  t.throws(() => claim(c, T0, 'stranger', 0), { code: 'not_owner' })
  t.throws(() => claim(c, T0, 'dell-01', 64), { code: 'invalid_request' })
  t.match(claim(c, T0, 'compaq-02', 16), { granted: true }, 'refused claims left the bucket free')
})

// a owns 0..7 alone (generation 1); b joins at T0+1000 and takes 4..7 at generation 2.
function handoffSetup(): Controller {
  const c = controllerWith([['a', 8]], { totalShards: 8, maxConcurrency: 8 })
  checkIn(c, T0 + 1000, body('b', 8), cert('b0'))
  return c
}

t.test('handoff: the new owner waits until the old one acknowledges the generation', async (t) => {
  const c = handoffSetup()
  t.equal(c.generation, 2)
  t.equal(c.ownerOf(4), 'b')
  t.same(c.snapshot().handoffs.map((h) => [h.shardId, h.fromNode, h.generation]), [4, 5, 6, 7].map((s) => [s, 'a', 2]))
  // a's lease runs out when now - (T0) > 30000, i.e. at T0 + 30001.
  t.same(claim(c, T0 + 2000, 'b', 4), { granted: false, reason: 'handoff_pending', retryAfterMs: LEASE_MS + 1 - 2000 })
  checkIn(c, T0 + 3000, body('a', 8, { generation: 1 }), cert('a0'))
  t.same(claim(c, T0 + 3000, 'b', 4), { granted: false, reason: 'handoff_pending', retryAfterMs: LEASE_MS + 1 })
  checkIn(c, T0 + 4000, body('a', 8, { generation: 2 }), cert('a0'))
  t.same(c.snapshot().handoffs, [])
  t.match(claim(c, T0 + 4000, 'b', 4), { granted: true, bucket: 4 })
})

t.test('handoff: the old owner expiring releases it', async (t) => {
  const c = handoffSetup()
  t.same(claim(c, T0 + LEASE_MS, 'b', 5), { granted: false, reason: 'handoff_pending', retryAfterMs: 1 })
  // At T0 + 30001 a expires: b takes every shard, and nobody else can be running 5.
  t.match(claim(c, T0 + LEASE_MS + 1, 'b', 5), { granted: true, generation: 3 })
  t.match(claim(c, T0 + LEASE_MS + 1, 'b', 0), { granted: true }, 'a shard of an expired owner is free too')
})

t.test('handoff: a shard moving back to its old owner before the ack is cleared', async (t) => {
  const c = handoffSetup()
  c.setDraining(T0 + 2000, 'b', true) // 4..7 go back to a
  t.equal(c.ownerOf(4), 'a')
  t.same(c.snapshot().handoffs, [])
  t.match(claim(c, T0 + 2000, 'a', 4), { granted: true }, 'a never stopped owning it in effect')
  c.setDraining(T0 + 3000, 'b', false) // and away again: a new handoff at the new generation
  t.same(c.snapshot().handoffs.map((h) => [h.shardId, h.fromNode, h.generation]), [4, 5, 6, 7].map((s) => [s, 'a', 4]))
})

t.test('handoff: a shard moving on to a third node keeps the original handoff', async (t) => {
  const c = handoffSetup()
  checkIn(c, T0 + 2000, body('c', 8), cert('c0')) // 8 shards over three nodes: a 0..2, b 3..5, c 6..7
  t.equal(c.generation, 3)
  t.same([c.ownerOf(3), c.ownerOf(6)], ['b', 'c'])
  const pending = c.snapshot().handoffs.map((h) => [h.shardId, h.fromNode, h.generation])
  // 3 left a now (generation 3); 6 and 7 went on from b to c but still wait for a (generation 2).
  t.same(pending, [[3, 'a', 3], [4, 'a', 2], [5, 'a', 2], [6, 'a', 2], [7, 'a', 2]])
  t.match(claim(c, T0 + 2000, 'c', 6), { granted: false, reason: 'handoff_pending' })
  checkIn(c, T0 + 3000, body('a', 8, { generation: 2 }), cert('a0'))
  t.same(c.snapshot().handoffs.map((h) => h.shardId), [3], 'the ack of generation 2 releases only those of generation 2')
  t.match(claim(c, T0 + 3000, 'c', 6), { granted: true })
  t.match(claim(c, T0 + 3000, 'b', 3), { granted: false, reason: 'handoff_pending' })
})

t.test('handoff: a revoked old owner is out at once, but its handoffs wait for its lease', async (t) => {
  const c = handoffSetup()
  // a last checked in at T0 + 0 (controllerWith); revoked at T0 + 2000 while it may be cut off and still running 4..7
  t.same(c.removeRevoked(T0 + 2000, (serial) => serial === 'a0'), ['a'])
  t.equal(c.counts().live, 1, 'a is out of the live set at once')
  t.same(c.plan(T0 + 2000).nodes.map((n) => [n.nodeId, n.rangeStart, n.rangeCount]), [['b', 0, 8]], 'and out of the plan: b holds every shard')
  t.same(claim(c, T0 + 2000, 'b', 4), { granted: false, reason: 'handoff_pending', retryAfterMs: LEASE_MS + 1 - 2000 }, 'a shard a had waits for its lease')
  t.same(claim(c, T0 + 2000, 'b', 0), { granted: false, reason: 'handoff_pending', retryAfterMs: LEASE_MS + 1 - 2000 }, 'so does one the revocation took from it')
  t.match(c.snapshot().meta.revoked, [['a', 'a0', c.generation]], 'the revoked holder is part of the state')
  t.throws(() => claim(c, T0 + 2001, 'a', 0), { code: 'not_owner' }, 'no more claims for the revoked node')
  t.match(claim(c, T0 + LEASE_MS + 1, 'b', 4), { granted: true }, 'granted once its lease ran out')
  t.equal(c.snapshot().meta.revoked, undefined, 'and the holder is gone')
  t.same(c.snapshot().handoffs, [])
})

t.test('handoff comes before the bucket check, and a pending claim records nothing', async (t) => {
  const c = handoffSetup()
  t.match(claim(c, T0 + 2000, 'b', 4), { reason: 'handoff_pending' })
  t.match(claim(c, T0 + 2000, 'a', 0), { granted: true, bucket: 0 })
  checkIn(c, T0 + 2500, body('a', 8, { generation: 2 }), cert('a0'))
  t.match(claim(c, T0 + 2500, 'b', 4), { granted: true, bucket: 4 }, 'bucket 4 was never marked')
})

t.test('daily budget: spent budget waits for the oldest grant to leave the 24-hour window', async (t) => {
  const day = 86_400_000
  const c = controllerWith([['a', 16]], { totalShards: 16, maxConcurrency: 16, dailyIdentifyLimit: 2 })
  const alive = (now: number) => checkIn(c, now, body('a', 16), cert('a0'))
  t.match(claim(c, T0, 'a', 0), { granted: true })
  alive(T0 + 10_000)
  t.match(claim(c, T0 + 10_000, 'a', 1), { granted: true })
  t.same(claim(c, T0 + 20_000, 'a', 2), { granted: false, reason: 'daily_limit', retryAfterMs: day - 20_000 })
  t.same(c.snapshot().dailyGrants, [T0, T0 + 10_000])
  alive(T0 + day - 1)
  t.same(claim(c, T0 + day - 1, 'a', 2), { granted: false, reason: 'daily_limit', retryAfterMs: 1 })
  t.match(claim(c, T0 + day, 'a', 2), { granted: true }, 'the first grant left the window')
  t.same(claim(c, T0 + day, 'a', 3), { granted: false, reason: 'daily_limit', retryAfterMs: 10_000 })
  alive(T0 + day + 10_000)
  t.match(claim(c, T0 + day + 10_000, 'a', 3), { granted: true })
})

t.test('daily budget: checked before the bucket, both refusals record nothing', async (t) => {
  const c = controllerWith([['a', 16]], { totalShards: 16, maxConcurrency: 1, dailyIdentifyLimit: 1 })
  t.match(claim(c, T0, 'a', 0), { granted: true })
  t.match(claim(c, T0 + 1, 'a', 1), { reason: 'daily_limit' })
  t.same(c.snapshot().dailyGrants, [T0])
})

t.test('the operator view of the daily budget: used, remaining and the next release, rolling over 24 h', async (t) => {
  const { IdentifyLimiter, DAILY_WINDOW_MS } = await import('../../src/core/identify.js')
  t.equal(new IdentifyLimiter(16, 5000, null).budget(T0), null, 'no budget without a limit')
  const limiter = new IdentifyLimiter(16, 5000, 3)
  t.same(limiter.budget(T0), { dailyLimit: 3, used24h: 0, remaining: 3, nextReleaseAt: null })
  limiter.record(T0, 0)
  limiter.record(T0 + 10, 1)
  limiter.record(T0 + 20, 2)
  limiter.record(T0 + 30, 3) // a grant past the limit cannot happen through check(); remaining stays at 0
  t.same(limiter.budget(T0 + 40), { dailyLimit: 3, used24h: 4, remaining: 0, nextReleaseAt: T0 + DAILY_WINDOW_MS })
  t.same(limiter.budget(T0 + DAILY_WINDOW_MS), { dailyLimit: 3, used24h: 3, remaining: 0, nextReleaseAt: T0 + 10 + DAILY_WINDOW_MS }, 'the first grant left the window')
  t.same(limiter.budget(T0 + 30 + DAILY_WINDOW_MS), { dailyLimit: 3, used24h: 0, remaining: 3, nextReleaseAt: null })
})
