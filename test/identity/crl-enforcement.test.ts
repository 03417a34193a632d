// The order CrlEnforcement acts in: a CRL the TLS context refuses changes nothing (its number is never
// recorded, so it cannot block the next CRL); an installed one is recorded, then acted on, then audited.
import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { normalizeSerial, parseCrl } from '../../src/identity/crl.js'
import { CrlEnforcement } from '../../src/identity/crl-enforcement.js'
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
