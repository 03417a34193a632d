import t from 'tap'
import { PeerAuditLimiter } from '../../src/audit/peer-audit-limiter.js'

function setup(maxPeers = 10) {
  const lines: Array<{ event: string; fields: Record<string, unknown> }> = []
  let clock = 0
  const limiter = new PeerAuditLimiter({ record: (event, fields) => lines.push({ event, fields }) }, () => clock, { maxPerWindow: 2, windowMs: 1000, maxPeers })
  return { lines, limiter, at: (ms: number) => (clock = ms) }
}

t.test('each event kind and peer has its own window; summaries keep the event name and the bare peer', async (t) => {
  const { lines, limiter, at } = setup()
  for (let i = 0; i < 5; i++) limiter.record('tls_rejected', '10.0.0.1', { reason: 'CERT_REVOKED' })
  for (let i = 0; i < 3; i++) limiter.record('unauthenticated', '10.0.0.1', { reason: 'unknown role' })
  t.equal(limiter.record('tls_rejected', '10.0.0.2', { reason: 'x' }), true, 'another peer is not held back')
  t.same(lines.map((l) => l.event), ['tls_rejected', 'tls_rejected', 'unauthenticated', 'unauthenticated', 'tls_rejected'])
  t.same(lines[0]!.fields, { peer: '10.0.0.1', reason: 'CERT_REVOKED' })
  lines.length = 0
  limiter.flushSuppressed()
  t.same(lines, [], 'nothing summarized before a window ends')
  at(1000)
  limiter.flushSuppressed()
  t.same(lines, [
    { event: 'tls_rejected', fields: { peer: '10.0.0.1', suppressed: 3, since: new Date(0).toISOString(), until: new Date(1000).toISOString() } },
    { event: 'unauthenticated', fields: { peer: '10.0.0.1', suppressed: 1, since: new Date(0).toISOString(), until: new Date(1000).toISOString() } },
  ])
})

t.test('past maxPeers, further peers share one window summarized as "other peers"', async (t) => {
  const { lines, limiter, at } = setup(1)
  limiter.record('tls_rejected', '10.0.0.1', {})
  for (let i = 2; i < 12; i++) limiter.record('tls_rejected', `10.0.0.${i}`, {})
  at(1000)
  lines.length = 0
  limiter.flushSuppressed()
  t.match(lines, [{ event: 'tls_rejected', fields: { peer: 'other peers', suppressed: 8 } }])
})

t.test('IPv6 peers share one window per /64 (as the connection caps count them); serials are not touched', async (t) => {
  const { lines, limiter, at } = setup(4)
  // A host rotating through its /64: 1,000 addresses, one line each, would flood the log per address.
  for (let i = 1; i <= 1000; i++) limiter.record('tls_rejected', `2001:db8:aa:bb::${i.toString(16)}`, { reason: 'CERT_REVOKED' })
  t.equal(lines.length, 2, 'two lines for the whole /64, the window of one peer')
  t.same(lines.map((l) => l.fields.peer), ['2001:db8:aa:bb::1', '2001:db8:aa:bb::2'], 'each line names the full address')
  t.equal(limiter.record('tls_rejected', '2001:db8:aa:bc::1', {}), true, 'the next /64 has its own window')
  t.equal(limiter.record('unauthenticated', '::ffff:10.0.0.9', {}), true)
  t.equal(limiter.record('unauthenticated', '10.0.0.9', {}), true, 'an IPv4-mapped address counts as its IPv4 address')
  t.equal(limiter.record('unauthenticated', '::ffff:10.0.0.9', {}), false)
  t.equal(limiter.record('not_owner', '2001:db8:aa:bb::1', {}), true, 'principal events are keyed by serial, as given')
  t.equal(limiter.record('not_owner', '2001:db8:aa:bb::2', {}), true)
  t.equal(limiter.record('not_owner', '2001:db8:aa:bb::3', {}), true, 'a different "serial" is a different principal')
  lines.length = 0
  at(1000)
  limiter.flushSuppressed()
  t.match(lines, [{ event: 'tls_rejected', fields: { peer: '2001:db8:aa:bb::/64', suppressed: 998 } }, { event: 'unauthenticated', fields: { peer: '10.0.0.9', suppressed: 1 } }], 'the summary names the /64')
})
