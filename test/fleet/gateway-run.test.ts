// Which undelivered test events a --gateway discordjs run counts as lost (bench/fleet/gateway-run.ts).
import t from 'tap'
import { judgeLost } from '../../bench/fleet/gateway-run.js'
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
