// Which undelivered test events a --gateway discordjs run counts as lost (bench/fleet/gateway-run.ts).
import t from 'tap'
import { judgeLost, splitOverlaps } from '../../bench/fleet/gateway-run.js'
import type { EventRef } from '../support/gateway/emulated-session.js'

const events = (sessionId: string, ns: number[]): EventRef[] => ns.map((n) => ({ sessionId, shardId: 0, numShards: 4, n, seq: n + 1 }))

t.test('a live session must have delivered everything; an ended one only up to its last delivered event', async (t) => {
  const undelivered = [...events('live', [3, 9]), ...events('ended', [2, 7, 8]), ...events('never', [1, 2])]
  const deliveries: Array<readonly [string, number]> = [['live', 1], ['live', 2], ['ended', 1], ['ended', 3], ['ended', 6]]
  const lost = judgeLost(undelivered, new Set(['live']), deliveries)
  t.same(
    lost.map((e) => `${e.sessionId}#${e.n}`),
    ['live#3', 'live#9', 'ended#2'],
    'every gap of a live session; a gap below the last delivered event of an ended one; not its tail, nor a session nobody received',
  )
  t.same(judgeLost([], new Set(['live']), deliveries), [], 'nothing undelivered, nothing lost')
})

t.test('an overlap with the session of a node revoked before it is allowed (SPEC "Handoff safety"); any other counts', async (t) => {
  const overlap = (at: number, a: string, b: string, shardId = 1) =>
    ({ kind: 'overlap', at, connectionId: null, detail: `${a} ${b}`, shardId, numShards: 4, sessionIds: [a, b] }) as const
  const owners = new Map([['old', new Set(['node-r'])], ['new', new Set(['node-b'])], ['own', new Set(['node-r'])], ['x', new Set(['node-c'])], ['y', new Set(['node-d'])]])
  const revocations = [{ node: 'node-r', requestedAt: 1000, at: 1100 }]
  const breaches = [overlap(900, 'new', 'old'), overlap(600, 'old', 'new'), overlap(700, 'own', 'old'), overlap(800, 'x', 'y'), { kind: 'heartbeat_miss', at: 1, connectionId: 1, detail: '', shardId: 1, sessionId: 'x', waitedMs: 2500 } as const]
  // t0 = 500: the breaches at 600 and above are at 1100 and later on the shared timeline
  const { counted, revoked } = splitOverlaps(breaches, revocations, owners, 500)
  t.equal(revoked, 2, 'a revoked node and another node, after the revocation, in either order')
  t.same(counted.map((b) => b.detail), ['own old', 'x y', ''], 'a revoked node overlapping itself counts, so do other nodes, and other breaches are kept')
  t.equal(splitOverlaps(breaches, revocations, owners, 0).revoked, 0, 'before the revocation nothing is allowed')
})
