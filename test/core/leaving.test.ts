// Leaving on purpose in the pure core (SPEC "Leaving on purpose"): a node that says it is leaving is out of the
// live set and the plan at once, its handoffs are released by that check-in, and the sessions it deposits for
// the shards it ran are handed to their new owners, who resume at once instead of waiting a lease.
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import type { SessionEntry } from '../../src/core/schemas.js'
import { DepositRefused } from '../../src/core/session-deposit.js'
import { body, cert, checkIn, claimAnswered, SETTINGS, T0 } from './fixtures.js'

const settings = { ...SETTINGS, leaseSeconds: 300, sessionHandoff: { allowedHosts: ['*.discord.gg'], ttlSeconds: 60 } }
const entry = (shardId: number): SessionEntry => ({ shard_id: shardId, session_id: `s${shardId}`, sequence: shardId * 10, resume_url: 'wss://gateway-1.discord.gg' })
const claim = (c: Controller, now: number, nodeId: string, shardId: number) => claimAnswered(c, now, { node_id: nodeId, shard_id: shardId })

/** a and b share 64 shards (32 each), every handoff released; each has room for all 64. */
function pair(): { c: Controller; generation: number } {
  const c = new Controller(settings)
  checkIn(c, T0, body('a', 64), cert('a1'))
  const generation = checkIn(c, T0 + 1000, body('b', 64), cert('b1')).generation
  checkIn(c, T0 + 2000, body('a', 64, { generation }), cert('a1'))
  checkIn(c, T0 + 2000, body('b', 64, { generation }), cert('b1'))
  c.drainEvents()
  return { c, generation }
}

t.test('a leaving node is out at once; its shards resume on the new owner at once, with its sessions', async (t) => {
  const { c, generation } = pair()
  t.equal(c.ownerOf(0), 'a')
  const answer = checkIn(c, T0 + 3000, body('a', 64, { generation, leaving: true, sessions: [entry(0), entry(5)] }), cert('a1'))
  t.equal(answer.rangeCount, 0, 'the answer is the plan without the node')
  t.ok(answer.generation > generation, 'a new generation')
  t.equal(c.ownerOf(0), 'b', 'its shards moved')
  t.notOk(c.plan(T0 + 3000).nodes.some((n) => n.nodeId === 'a'), 'out of the live set')
  t.same(c.plan(T0 + 3000).recentLeaves, [{ nodeId: 'a', at: T0 + 3000 }], 'shown as a recent leave')
  const events = c.drainEvents()
  t.match(events.filter((e) => e.kind === 'node_left'), [{ kind: 'node_left', nodeId: 'a', serial: 'a1', sessions: 2 }])
  t.equal(events.filter((e) => e.kind === 'session_deposited').length, 2)
  // no handoff wait: the leave released them; shard 0 resumes, shard 1 (no session) identifies
  t.match(claim(c, T0 + 3001, 'b', 0), { granted: true, mode: 'resume', session: { sessionId: 's0', sequence: 0 } })
  t.match(claim(c, T0 + 3002, 'b', 1), { granted: true, mode: 'identify' })
  t.match(claim(c, T0 + 3003, 'b', 5), { granted: true, mode: 'resume' }, 'a resume spends no bucket slot')
  t.same(c.plan(T0 + 3000 + 3_600_001).recentLeaves, [], 'shown for an hour')
})

t.test('a leaving node may deposit only for shards it owns or had to hand off; one bad entry refuses the whole leave', async (t) => {
  const { c, generation } = pair()
  const before = c.plan(T0 + 3000)
  const refused = () => c.register(T0 + 3000, body('a', 64, { generation, leaving: true, sessions: [entry(0), entry(40)] }), cert('a1'))
  t.throws(refused, { code: 'invalid_request', message: /shard 40 has no pending handoff from this node/ }, "shard 40 is b's")
  t.same(c.plan(T0 + 3000), before, 'nothing changed: a is still live, nothing moved')
  const url = () => c.register(T0 + 3000, body('a', 64, { generation, leaving: true, sessions: [{ ...entry(0), resume_url: 'wss://evil.example' }] }), cert('a1'))
  t.throws(url, { code: 'invalid_request', message: /resume_url/ }, 'a foreign resume host')
  try {
    url()
  } catch (err) {
    t.ok(err instanceof DepositRefused, 'a deposit refusal (audited with its rule by the route)')
  }
  t.same(c.plan(T0 + 3000), before)
})

t.test('a leave from a superseded certificate is refused like its check-in; a node that is not live changes nothing; a left node joins again', async (t) => {
  const { c, generation } = pair()
  checkIn(c, T0 + 2500, body('a', 64, { generation }), cert('a2', T0)) // a rotated to a newer certificate
  const before = c.plan(T0 + 3000)
  t.throws(() => c.register(T0 + 3000, body('a', 64, { generation, leaving: true }), cert('a1')), { code: 'identity_conflict' })
  t.same(c.plan(T0 + 3000), before, 'still live, nothing moved')
  const ghost = checkIn(c, T0 + 3000, body('nobody', 8, { leaving: true }), cert('n1'))
  t.equal(ghost.rangeCount, 0)
  t.same(c.plan(T0 + 3000), before, 'a leave of a node that is not live changes nothing')
  checkIn(c, T0 + 4000, body('a', 64, { generation, leaving: true }), cert('a2', T0))
  t.notOk(c.plan(T0 + 4000).nodes.some((n) => n.nodeId === 'a'))
  const back = checkIn(c, T0 + 5000, body('a', 64), cert('a2', T0))
  t.ok(back.rangeCount > 0, 'checking in again later simply joins')
})

t.test('a leave is durable: a restart does not bring the node back', async (t) => {
  const { c, generation } = pair()
  checkIn(c, T0 + 3000, body('a', 64, { generation, leaving: true }), cert('a1'))
  const restored = new Controller(settings, { state: c.snapshot(), now: T0 + 4000 })
  t.same(restored.plan(T0 + 4000).nodes.map((n) => n.nodeId), ['b'])
})
