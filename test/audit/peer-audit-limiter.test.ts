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
