// Session handoff in the pure core, on a manual clock (SPEC "Session handoff"): the TTL, the hand-out
// rules around the other claim checks, what a revocation, a re-deposit and a restart do, and that the
// durable state never carries a session.
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import type { SessionEntry } from '../../src/core/schemas.js'
import { DepositRefused } from '../../src/core/session-deposit.js'
import { SessionVault } from '../../src/core/session-vault.js'
import { body, cert, checkIn, claimAnswered, SETTINGS, T0 } from './fixtures.js'

const TTL_S = 60
// a lease longer than the TTL, so that nodes outlive their sessions in these tests unless told otherwise
const settings = { ...SETTINGS, leaseSeconds: 300, dailyIdentifyLimit: 100, sessionHandoff: { allowedHosts: ['*.discord.gg'], ttlSeconds: TTL_S } }
const entry = (shardId: number, sessionId = `s${shardId}`): SessionEntry => ({ shard_id: shardId, session_id: sessionId, sequence: shardId * 10, resume_url: 'wss://gateway-1.discord.gg' })

/** a holds 0..63 alone; b joins and takes 32..63 at generation 2 (waiting for a). */
function moved(over: Partial<typeof settings> = {}): { c: Controller; generation: number } {
  const c = new Controller({ ...settings, ...over })
  checkIn(c, T0, body('a', 64), cert('a1'))
  const generation = checkIn(c, T0 + 1000, body('b', 64), cert('b1')).generation
  c.drainEvents()
  return { c, generation }
}
const claim = (c: Controller, now: number, nodeId: string, shardId: number, fresh?: boolean) =>
  claimAnswered(c, now, { node_id: nodeId, shard_id: shardId, ...(fresh === undefined ? {} : { fresh }) })
const release = (c: Controller, now: number, generation: number, sessions: SessionEntry[]) =>
  checkIn(c, now, body('a', 64, { generation, sessions }), cert('a1'))

t.test('a deposit with the release is handed to the new owner once, as a resume', async (t) => {
  const { c, generation } = moved()
  release(c, T0 + 2000, generation, [entry(32), entry(48)])
  t.same(c.drainEvents().filter((e) => e.kind === 'session_deposited'), [
    { kind: 'session_deposited', nodeId: 'a', shardId: 32, generation },
    { kind: 'session_deposited', nodeId: 'a', shardId: 48, generation },
  ])
  t.equal(c.sessionsHeld(T0 + 2000), 2)
  t.same(claim(c, T0 + 3000, 'b', 32), {
    granted: true, mode: 'resume', shardId: 32, bucket: 0, generation,
    session: { sessionId: 's32', sequence: 320, resumeUrl: 'wss://gateway-1.discord.gg' },
  })
  t.same(c.drainEvents(), [{ kind: 'session_handed', nodeId: 'b', shardId: 32, generation }], 'handed, no identify_granted')
  t.equal(c.dailyBudgetRemaining(T0 + 3000), 100, 'no daily budget spent')
  // 48 shares bucket 0 with 32: the resume left the bucket free, so this resume and then an Identify go at once
  t.match(claim(c, T0 + 3000, 'b', 48), { granted: true, mode: 'resume' })
  t.match(claim(c, T0 + 3000, 'b', 32), { granted: true, mode: 'identify', bucket: 0 }, 'handed once: then an ordinary claim')
  t.equal(c.dailyBudgetRemaining(T0 + 3000), 99)
  t.equal(c.sessionsHeld(T0 + 3000), 0)
})

t.test('the ownership, reshard and handoff checks come first; the budget and the bucket do not apply', async (t) => {
  const { c, generation } = moved()
  release(c, T0 + 2000, generation, [entry(32), entry(33)])
  t.throws(() => claim(c, T0 + 2000, 'a', 32), { code: 'not_owner' }, 'the depositor cannot take it back')
  t.equal(c.sessionsHeld(T0 + 2000), 2, 'a refused claim leaves the session held')
  // spend the whole daily budget on b's other shards: resumes still go
  const tight = new Controller({ ...settings, dailyIdentifyLimit: 1 })
  checkIn(tight, T0, body('a', 64), cert('a1'))
  const g = checkIn(tight, T0 + 1000, body('b', 64), cert('b1')).generation
  release(tight, T0 + 2000, g, [entry(40)])
  t.match(claim(tight, T0 + 2000, 'b', 41), { granted: true, mode: 'identify' })
  t.match(claim(tight, T0 + 9000, 'b', 42), { granted: false, reason: 'daily_limit' })
  t.match(claim(tight, T0 + 9000, 'b', 40), { granted: true, mode: 'resume' }, 'a resume needs no budget')
})

t.test('fresh: true discards the held session and is an ordinary claim, also when that claim must wait', async (t) => {
  const { c, generation } = moved()
  release(c, T0 + 2000, generation, [entry(32), entry(33)])
  t.match(claim(c, T0 + 2000, 'b', 48), { granted: true, mode: 'identify', bucket: 0 })
  t.match(claim(c, T0 + 2000, 'b', 32, true), { granted: false, reason: 'bucket_busy' })
  t.equal(c.sessionsHeld(T0 + 2000), 1, 'discarded although the claim waits')
  t.match(claim(c, T0 + 7100, 'b', 32), { granted: true, mode: 'identify' })
  t.match(claim(c, T0 + 7100, 'b', 33, false), { granted: true, mode: 'resume' }, 'fresh: false is no fresh claim')
})

t.test('a held session expires after session_handoff.ttl_seconds', async (t) => {
  const { c, generation } = moved()
  release(c, T0 + 2000, generation, [entry(32), entry(33)])
  const end = T0 + 2000 + TTL_S * 1000
  t.match(claim(c, end - 1, 'b', 32), { mode: 'resume' }, 'still held 1 ms before the end')
  t.equal(c.sessionsHeld(end - 1), 1)
  t.equal(c.sessionsHeld(end), 0, 'gone at the end')
  t.match(claim(c, end, 'b', 33), { granted: true, mode: 'identify' })
})

t.test("a revoked depositor's sessions are discarded; an expired one's are kept", async (t) => {
  const { c, generation } = moved()
  release(c, T0 + 2000, generation, [entry(32), entry(33)])
  t.same(c.removeRevoked(T0 + 3000, (serial) => serial === 'a1'), ['a'])
  t.equal(c.sessionsHeld(T0 + 3000), 0)
  const second = moved({ leaseSeconds: 30, sessionHandoff: { allowedHosts: ['*.discord.gg'], ttlSeconds: 300 } })
  release(second.c, T0 + 2000, second.generation, [entry(32)])
  // a stops checking in and expires; b keeps renewing: the session a left is still good
  checkIn(second.c, T0 + 20_000, body('b', 64), cert('b1'))
  t.same(second.c.expireStaleNodes(T0 + 32_001), ['a'])
  t.match(claim(second.c, T0 + 32_001, 'b', 32), { granted: true, mode: 'resume' })
})

t.test('refused deposits change nothing: no session, no release, no renewal', async (t) => {
  const { c, generation } = moved()
  const view = JSON.stringify(c.plan(T0 + 1500))
  const state = JSON.stringify(c.snapshot())
  const cases: [string, SessionEntry[], number | undefined, string][] = [
    ['a kept shard', [entry(0)], generation, 'not_released_by_node'],
    ['not released by this check-in', [entry(32)], undefined, 'not_released_by_checkin'],
    ['an older generation', [entry(32)], generation - 1, 'not_released_by_checkin'],
    ['beyond total_shards', [entry(64)], generation, 'shard_range'],
    ['twice', [entry(32), entry(32)], generation, 'duplicate_shard'],
    ['a foreign host', [{ ...entry(32), resume_url: 'wss://gateway.discord.gg.evil.com' }], generation, 'resume_url'],
  ]
  for (const [label, sessions, reported, rule] of cases) {
    const extra = reported === undefined ? { sessions } : { sessions, generation: reported }
    let thrown: unknown = null
    try {
      c.register(T0 + 1500, body('a', 64, extra), cert('a1'))
    } catch (err) {
      thrown = err
    }
    t.ok(thrown instanceof DepositRefused, `${label}: refused`)
    t.match(thrown, { rule, code: 'invalid_request', statusCode: 400 }, `${label}: rule`)
    t.equal(JSON.stringify(c.plan(T0 + 1500)), view, `${label}: plan and last_seen unchanged`)
    t.equal(JSON.stringify(c.snapshot()), state, `${label}: durable state unchanged (the handoff still pending)`)
    t.equal(c.sessionsHeld(T0 + 1500), 0, `${label}: nothing held`)
    t.same(c.drainEvents(), [], `${label}: no event`)
  }
  // a node that is not live (never checked in) has no handoff to release
  t.throws(() => c.register(T0 + 1500, body('z', 8, { generation, sessions: [entry(32)] }), cert('z1')), { name: 'AppError', message: /no pending handoff from this node/ })
  t.equal(JSON.stringify(c.plan(T0 + 1500)), view, 'the stranger did not join')
})

t.test('sessions never reach the durable state, and a restart forgets them', async (t) => {
  const { c, generation } = moved()
  release(c, T0 + 2000, generation, [entry(32, 'SECRETSESSION32')])
  const snapshot = c.snapshot()
  t.notOk(JSON.stringify(snapshot).includes('SECRETSESSION32'), 'not in the snapshot')
  t.notOk(JSON.stringify(c.takeDelta()).includes('SECRETSESSION32'), 'not in a delta')
  const restarted = new Controller(settings, { state: snapshot, now: T0 + 3000 })
  t.equal(restarted.sessionsHeld(T0 + 3000), 0)
  t.match(claim(restarted, T0 + 9000, 'b', 32), { granted: true, mode: 'identify' }, 'the new owner identifies after a restart (once the buckets reopen)')
})

t.test('SessionVault: one per shard, a re-deposit replaces and restarts the TTL, discardFrom per depositor', async (t) => {
  const vault = new SessionVault(1000)
  vault.deposit(0, 1, 'a', { sessionId: 'x', sequence: 1, resumeUrl: 'u' })
  vault.deposit(500, 1, 'b', { sessionId: 'y', sequence: 2, resumeUrl: 'u' })
  vault.deposit(600, 2, 'a', { sessionId: 'z', sequence: 3, resumeUrl: 'u' })
  t.equal(vault.size(1200), 2, 'the re-deposit of shard 1 counts from 500')
  t.equal(vault.discardFrom('a'), 1)
  t.same(vault.take(1400, 1), { sessionId: 'y', sequence: 2, resumeUrl: 'u' })
  t.equal(vault.take(1400, 1), null, 'once')
  t.notOk(vault.discard(2))
})
