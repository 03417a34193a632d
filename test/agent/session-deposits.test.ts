// Sessions held for deposit on a manual clock: the controller's rules checked before anything is sent
// (a bad entry would refuse the whole check-in), entries only in a check-in that reports their
// generation, at most 128, and drops reported by shard ID only.
import t from 'tap'
import { MAX_SESSION_WAIT_MS, SessionDeposits, type SessionDropReason } from '../../src/agent/session-deposits.js'
import { parseHostSession, parseWireSession, resumeUrlShapeProblem } from '../../src/agent/session.js'
import { FakeClock } from './fake-clock.js'

const SESSION = { sessionId: 'abcDEF123', sequence: 4711, resumeUrl: 'wss://gateway-us-east1-b.discord.gg' }

function setup() {
  const clock = new FakeClock()
  const drops: { reason: SessionDropReason; shardIds: readonly number[]; detail: string }[] = []
  const deposits = new SessionDeposits({ clock, dropped: (reason, shardIds, detail) => void drops.push({ reason, shardIds, detail }) })
  return { clock, drops, deposits }
}

t.test('a host session passes only the rules every controller applies; the problem never quotes the value', async (t) => {
  const cases: [string, unknown, RegExp | null][] = [
    ['valid', SESSION, null],
    ['ws:// loopback with a port (tests)', { ...SESSION, resumeUrl: 'ws://127.0.0.1:4567' }, null],
    ['a trailing slash', { ...SESSION, resumeUrl: 'wss://gateway.discord.gg/' }, null],
    ['sequence 0 and 2^53-1', { ...SESSION, sequence: Number.MAX_SAFE_INTEGER }, null],
    ['session ID of 128 characters', { ...SESSION, sessionId: 'a'.repeat(128) }, null],
    ['session ID of 129 characters', { ...SESSION, sessionId: 'a'.repeat(129) }, /sessionId must be 1 to 128 letters and digits/],
    ['session ID with a dash', { ...SESSION, sessionId: 'abc-def' }, /sessionId must be 1 to 128 letters and digits/],
    ['empty session ID', { ...SESSION, sessionId: '' }, /sessionId must be/],
    ['negative sequence', { ...SESSION, sequence: -1 }, /sequence must be an integer in 0\.\.2\^53-1/],
    ['fractional sequence', { ...SESSION, sequence: 1.5 }, /sequence must be an integer/],
    ['sequence beyond 2^53-1', { ...SESSION, sequence: 2 ** 53 }, /sequence must be an integer/],
    ['sequence as a string', { ...SESSION, sequence: '5' }, /sequence must be an integer/],
    ['resume URL over 256 characters', { ...SESSION, resumeUrl: `wss://${'a'.repeat(250)}.gg` }, /resumeUrl must be at most 256 characters/],
    ['https resume URL', { ...SESSION, resumeUrl: 'https://gateway.discord.gg' }, /resumeUrl must be a wss:\/\/ URL/],
    ['resume URL with a path', { ...SESSION, resumeUrl: 'wss://gateway.discord.gg/x' }, /no path, query or fragment/],
    ['resume URL with a query', { ...SESSION, resumeUrl: 'wss://gateway.discord.gg/?v=10' }, /no path, query or fragment/],
    ['resume URL with credentials', { ...SESSION, resumeUrl: 'wss://u:p@gateway.discord.gg' }, /user name or password/],
    ['resume URL with a space', { ...SESSION, resumeUrl: 'wss://gateway.discord.gg /' }, /printable ASCII/],
    ['resume URL with a backslash', { ...SESSION, resumeUrl: 'wss://evil.example\\@gateway.discord.gg' }, /printable ASCII/],
    ['not a URL', { ...SESSION, resumeUrl: 'gateway' }, /is not a URL/],
    ['an unknown field', { ...SESSION, shardId: 3 }, /has unknown fields \(shardId\)/],
    ['a missing field', { sessionId: 'abc', sequence: 1 }, /resumeUrl must be a string/],
    ['not an object', 'abc', /must be an object/],
  ]
  for (const [what, value, problem] of cases) {
    const parsed = parseHostSession(value)
    if (problem === null) t.same(parsed, { session: value }, what)
    else {
      t.ok('problem' in parsed && problem.test(parsed.problem), `${what}: ${'problem' in parsed ? parsed.problem : 'accepted'}`)
      if ('problem' in parsed) t.notMatch(parsed.problem, /abc|gateway|evil|aaaa/, `${what}: the value is not quoted`)
    }
  }
  t.same(parseWireSession({ session_id: 'abc', sequence: 1, resume_url: 'wss://gateway.discord.gg' }), { session: { sessionId: 'abc', sequence: 1, resumeUrl: 'wss://gateway.discord.gg' } })
  t.ok('problem' in parseWireSession({ session_id: 'abc', sequence: 1, resume_url: 'wss://gateway.discord.gg', extra: 1 }), 'the wire shape is strict too')
  t.equal(resumeUrlShapeProblem('wss://gateway.discord.gg:443'), null)
})

t.test('a session is offered only to a check-in whose generation covers the plan that moved its shard', async (t) => {
  const s = setup()
  s.deposits.keep(5, SESSION, 3)
  t.same(s.deposits.batchFor(null, []).entries, [], 'no generation reported yet')
  t.same(s.deposits.batchFor(2, []).entries, [], 'an older generation releases nothing: the entry would be refused')
  const batch = s.deposits.batchFor(3, [0, 1])
  t.same(batch.entries, [{ shard_id: 5, session_id: 'abcDEF123', sequence: 4711, resume_url: 'wss://gateway-us-east1-b.discord.gg' }])
  t.same(s.deposits.shards, [5], 'still held until the check-in is answered')
  s.deposits.settle(batch)
  t.same(s.deposits.shards, [], 'answered: done with')
  t.same(s.drops, [])
})

t.test('a shard moved again while its check-in was out keeps its newer session', async (t) => {
  const s = setup()
  s.deposits.keep(5, SESSION, 3)
  const batch = s.deposits.batchFor(3, [])
  s.deposits.keep(5, { ...SESSION, sequence: 9 }, 4)
  s.deposits.settle(batch)
  t.same(s.deposits.batchFor(4, []).entries.map((e) => e.sequence), [9])
})

t.test('dropped, each with an event naming shards only: invalid, given back, too old, beyond 128', async (t) => {
  const s = setup()
  s.deposits.keep(1, { ...SESSION, sessionId: 'not valid!' }, 2)
  t.same(s.drops.map((d) => [d.reason, d.shardIds]), [['invalid', [1]]])
  t.match(s.drops[0]!.detail, /sessionId must be 1 to 128 letters and digits/)
  t.notMatch(s.drops[0]!.detail, /not valid!/)

  s.deposits.keep(2, SESSION, 2)
  s.deposits.batchFor(2, [2, 3])
  t.same(s.drops[1] && [s.drops[1].reason, s.drops[1].shardIds], ['given_back', [2]], 'the plan gave the shard back: the controller would refuse the entry')

  s.deposits.keep(3, SESSION, 2)
  await s.clock.advance(MAX_SESSION_WAIT_MS + 1)
  t.same(s.deposits.batchFor(2, []).entries, [])
  t.same(s.drops[2] && [s.drops[2].reason, s.drops[2].shardIds], ['expired', [3]])

  for (let shard = 0; shard < 130; shard++) s.deposits.keep(shard, SESSION, 2)
  const batch = s.deposits.batchFor(2, [])
  t.equal(batch.entries.length, 128, 'at most 128 in one check-in')
  t.same(batch.entries.map((e) => e.shard_id), Array.from({ length: 128 }, (_, i) => i))
  t.same(s.drops[3] && [s.drops[3].reason, s.drops[3].shardIds], ['over_limit', [128, 129]])
  t.notOk(s.drops.some((d) => d.detail.includes('abcDEF123')), 'no session ID in any drop')
})
