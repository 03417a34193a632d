// The order CrlEnforcement acts in: a CRL the TLS context refuses changes nothing (its number is never
// recorded, so it cannot block the next CRL); an installed one is recorded, then acted on, then audited.
import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { normalizeSerial, parseCrl } from '../../src/identity/crl.js'
import { CrlEnforcement, CrlSideNotStarted } from '../../src/identity/crl-enforcement.js'
import { genCrl, issue, makeCa, revoke, tempDir } from './crl-openssl.js'

const dir = tempDir(t)
const ca = makeCa(dir, 'enforce', 'ec')
const node = issue(ca, 'node-1')
const first = genCrl(ca) // 1
revoke(ca, node)
const second = genCrl(ca) // 2, revokes node-1
const third = genCrl(ca) // 3
const serial = normalizeSerial(node.cert.serialNumber)

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !cond(); i++) await new Promise((resolve) => setTimeout(resolve, 10))
}

t.test('a CRL the TLS context refuses changes nothing; the next one is installed and recorded', async (t) => {
  const path = join(dir, 'crl.pem')
  writeFileSync(path, first)
  const audit: { event: string; fields: Record<string, unknown> }[] = []
  const recorded: bigint[] = []
  const installed: string[] = []
  let failInstall = true
  const crls = new CrlEnforcement(parseCrl(first), {
    path,
    ca: ca.cert,
    intervalMs: 100,
    audit: { record: (event, fields) => audit.push({ event, fields }) },
  })
  t.teardown(() => crls.stop())
  crls.start({
    installTls: (pem) => {
      if (failInstall) throw new Error('setSecureContext failed')
      installed.push(pem)
    },
    dropRevoked: (isRevoked) => ({ closedConnections: isRevoked(serial) ? 1 : 0, removedNodes: isRevoked(serial) ? ['node-1'] : [] }),
    recordCrlNumber: (n) => recorded.push(n),
  })
  t.same(recorded, [1n], 'start records the CRL in force')

  writeFileSync(path, second)
  await until(() => audit.length > 0)
  t.match(audit, [{ event: 'crl_refused', fields: { reason: 'install_failed', crl_number: '2', in_force_crl_number: '1', message: /setSecureContext failed/ } }])
  t.same(recorded, [1n], 'the refused CRL number is not recorded')
  t.notOk(crls.isRevoked(serial), 'the CRL in force is unchanged, for per-request checks too')

  failInstall = false
  writeFileSync(path, third)
  await until(() => audit.length > 1)
  t.match(audit[1], { event: 'crl_loaded', fields: { crl_number: '3', closed_connections: 1, removed_nodes: ['node-1'] } })
  t.same(recorded, [1n, 3n])
  t.equal(installed.length, 1)
  t.ok(crls.isRevoked(serial))
  t.equal(crls.inForce.crlNumber, 3n)
})

t.test('offered CRLs (a push, the cluster copy) are judged and installed by the file rules, and the file cannot undo them', async (t) => {
  const dir2 = tempDir(t)
  const ca2 = makeCa(dir2, 'offer', 'ec')
  const leaf = issue(ca2, 'node-2')
  const one = genCrl(ca2) // 1
  revoke(ca2, leaf)
  const two = genCrl(ca2) // 2, revokes node-2
  const ahead = genCrl(ca2, { lastUpdate: new Date(Date.now() + 3_600_000) }) // 3, thisUpdate in an hour
  const leafSerial = normalizeSerial(leaf.cert.serialNumber)
  const path = join(dir2, 'crl.pem')
  writeFileSync(path, one)
  const audit: { event: string; fields: Record<string, unknown> }[] = []
  let failInstall = false
  const crls = new CrlEnforcement(parseCrl(one), { path, ca: ca2.cert, intervalMs: 100, audit: { record: (event, fields) => audit.push({ event, fields }) } })
  t.teardown(() => crls.stop())
  t.throws(() => crls.offer(two, { source: 'cluster' }), CrlSideNotStarted, 'nothing is offered before start')
  crls.start({
    installTls: () => {
      if (failInstall) throw new Error('setSecureContext failed')
    },
    dropRevoked: (isRevoked) => ({ closedConnections: isRevoked(leafSerial) ? 1 : 0, removedNodes: [] }),
    recordCrlNumber: () => undefined,
  })

  failInstall = true
  t.match(crls.offer(two, { source: 'push', by: 'alice' }), { kind: 'refused', reason: 'install_failed' })
  t.notOk(crls.isRevoked(leafSerial), 'a failed install puts the CRL in force back')
  failInstall = false
  t.match(crls.offer(two, { source: 'push', by: 'alice' }), { kind: 'loaded' })
  t.ok(crls.isRevoked(leafSerial))
  t.match(audit.at(-1), { event: 'crl_loaded', fields: { crl_number: '2', source: 'push', by: 'alice', closed_connections: 1 } })
  t.match(crls.offer(two, { source: 'cluster' }), { kind: 'same' }, 'the same CRL again: nothing to do')

  const before = audit.length
  t.match(crls.offer(ahead, { source: 'cluster' }), { kind: 'not_yet_valid' }, 'the cluster copy ahead of this clock waits for the next offer')
  t.equal(audit.length, before, 'not audited')
  t.match(crls.offer(ahead, { source: 'push', by: 'alice' }), { kind: 'refused', reason: 'not_yet_valid', message: /in the future/ }, 'a push ahead of the clock is refused')
  t.match(audit.at(-1), { event: 'crl_refused', fields: { reason: 'not_yet_valid', source: 'push', by: 'alice', crl_number: '3', in_force_crl_number: '2' } })
  t.match(crls.offer(one, { source: 'cluster' }), { kind: 'refused', reason: 'older_crl' })
  t.notOk('path' in audit.at(-1)!.fields, 'an offered CRL has no path')

  // the file, unchanged since the start, holds CRL 1: once it is judged, it is refused, and CRL 2 stays
  writeFileSync(path, `${one}\n`)
  await until(() => audit.at(-1)?.fields.source === 'file')
  t.match(audit.at(-1), { event: 'crl_refused', fields: { source: 'file', reason: 'older_crl', path } })
  t.equal(crls.inForce.crlNumber, 2n)
})
