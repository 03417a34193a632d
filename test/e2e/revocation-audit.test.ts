// Live revocation end to end with the real CLI, refused CRLs, and every audit event from real actions.
import t, { type Test } from 'tap'
import { spawnSync } from 'node:child_process'
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs'
import https from 'node:https'
import { connect } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { revoke, writeCrl } from '../../pki/revocation.js'
import { AUDIT_EVENTS } from '../../src/audit/audit-events.js'
import { EXTENSION_VALUES, craftCrl } from '../identity/crl-craft.js'
import { bundle, checkinBody, makePki, opensslCert, request, startTestController } from './harness.js'
import { testDir } from '../support/test-dir.js'

const CLI = fileURLToPath(new URL('../../dist/pki/cli.js', import.meta.url))
const pkiCli = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' })
const root = testDir(t)
const pki = await makePki(root)
const foreign = await makePki(join(root, 'foreign'))
const nodeA = await bundle(pki, 'node-a', 'node')
const nodeB = await bundle(pki, 'node-b', 'node')
const op = await bundle(pki, 'ops', 'operator')
// This file counts audit lines of refused handshakes: the per-peer limit (5 a minute) is raised so that
// a refusal added later cannot push an expected line into a summary. test/e2e/audit-flood.test.ts
// covers the limit itself.
const UNLIMITED = { peerAuditLimits: { maxPerWindow: 1000, windowMs: 60_000, maxPeers: 1024 } }
const ctl = await startTestController(pki, root, { total_shards: 32, max_concurrency: 1, lease_seconds: 30 }, UNLIMITED)
t.teardown(() => ctl.running.stop())
const crlPath = join(pki.dir, 'crl.pem')
const oldCrl = join(root, 'crl-before.pem')
copyFileSync(crlPath, oldCrl)

/** The audit lines of one event kind, parsed. */
const auditLines = (event: string): Record<string, any>[] =>
  readFileSync(join(root, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((e) => e.event === event)

/** Polls until `check` holds or the deadline passes; returns the elapsed ms or -1. */
async function within(ms: number, check: () => Promise<boolean> | boolean): Promise<number> {
  const start = Date.now()
  while (Date.now() - start < ms) {
    if (await check()) return Date.now() - start
    await new Promise((r) => setTimeout(r, 50))
  }
  return -1
}

t.test('revoking a node with pki revoke: connection closed, handshake refused, gone from the plan, within 2 s', async (t) => {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const a = await request(ctl.port, pki.ca, nodeA, '/v1/checkin', { body: checkinBody('node-a'), agent })
  t.equal(a.status, 200)
  t.equal((await request(ctl.port, pki.ca, nodeB, '/v1/checkin', { body: checkinBody('node-b') })).status, 200)
  const sockets = Object.values(agent.freeSockets).flat()
  t.equal(sockets.length, 1, 'one idle keep-alive connection')
  let closed = false
  sockets[0]!.once('close', () => (closed = true))

  const res = pkiCli('revoke', 'node-a', '--dir', pki.dir)
  t.equal(res.status, 0, res.stderr)
  const elapsed = await within(2000, async () => {
    const plan = await request(ctl.port, pki.ca, op, '/v1/plan')
    return closed && !plan.json.nodes.some((n: { node_id: string }) => n.node_id === 'node-a')
  })
  t.ok(elapsed >= 0, `connection closed and node removed within 2 s (took ${elapsed} ms)`)
  await t.rejects(request(ctl.port, pki.ca, nodeA, '/v1/keys'), 'a new handshake with the revoked certificate fails')
  const b = await request(ctl.port, pki.ca, nodeB, '/v1/checkin', { body: checkinBody('node-b') })
  t.equal(b.status, 200, 'other nodes are unaffected')
  t.equal(b.json.range_count, 16)
})

t.test('a CRL from a foreign CA and an older CRL are refused; the current one stays in force', async (t) => {
  const current = readFileSync(crlPath)
  const countRefused = () => (readFileSync(join(root, 'audit.log'), 'utf8').match(/"event":"crl_refused"/g) ?? []).length
  const refusedBefore = countRefused()
  // Both checks matter: had the foreign CRL been installed, OpenSSL would find no CRL for our CA and
  // refuse everyone (node-b too); had the older one been installed, node-a would get in again.
  const stillInForce = async (t: Test, what: string) => {
    await t.rejects(request(ctl.port, pki.ca, nodeA, '/v1/keys'), `${what}: node-a's revocation still in force`)
    t.equal((await request(ctl.port, pki.ca, nodeB, '/v1/keys')).status, 200, `${what}: node-b still served`)
  }
  copyFileSync(join(foreign.dir, 'crl.pem'), crlPath)
  t.ok((await within(2500, () => countRefused() > refusedBefore)) >= 0, 'foreign CRL refused and audited')
  await stillInForce(t, 'after the foreign CRL')
  copyFileSync(oldCrl, crlPath)
  t.ok((await within(2500, () => countRefused() > refusedBefore + 1)) >= 0, 'older CRL refused and audited')
  await stillInForce(t, 'after the older CRL')
  writeFileSync(crlPath, current)
})

t.test('a CRL with a critical extension OpenSSL does not handle is refused; the next pxe-pki revoke still takes effect within 2 s', async (t) => {
  const nodeD = await bundle(pki, 'node-d', 'node')
  t.equal((await request(ctl.port, pki.ca, nodeD, '/v1/checkin', { body: checkinBody('node-d') })).status, 200)
  // Signed by our CA, numbered far ahead of the PKI, with a critical issuerAltName: had it been installed,
  // OpenSSL would refuse every client, and its number would make the next real CRL look older.
  const now = Date.now()
  const bad = craftCrl({
    caCertPem: pki.ca,
    caKeyPem: readFileSync(join(pki.dir, 'ca-key.pem'), 'utf8'),
    thisUpdate: new Date(now - 60_000),
    nextUpdate: new Date(now + 86_400_000),
    extensions: [
      { oid: '2.5.29.20', critical: false, value: EXTENSION_VALUES.crlNumber(1000) },
      { oid: '2.5.29.18', critical: true, value: EXTENSION_VALUES.issuerAltName() },
    ],
  })
  const refusedBefore = auditLines('crl_refused').length
  writeFileSync(crlPath, bad)
  t.ok((await within(2000, () => auditLines('crl_refused').length > refusedBefore)) >= 0, 'refused within 2 s')
  t.match(auditLines('crl_refused').at(-1), { reason: 'unsupported', crl_number: null, message: /2\.5\.29\.18 is marked critical/ })
  t.equal((await request(ctl.port, pki.ca, nodeB, '/v1/keys')).status, 200, 'node-b still served: the old CRL is in force')
  t.equal((await request(ctl.port, pki.ca, nodeD, '/v1/keys')).status, 200, 'node-d too')

  const loadedBefore = auditLines('crl_loaded').length
  const res = pkiCli('revoke', 'node-d', '--dir', pki.dir)
  t.equal(res.status, 0, res.stderr)
  const elapsed = await within(2000, async () => {
    const refused = await request(ctl.port, pki.ca, nodeD, '/v1/keys').then(() => false, () => true)
    return refused && auditLines('crl_loaded').length > loadedBefore
  })
  t.ok(elapsed >= 0, `the CRL of pxe-pki revoke installed and node-d refused within 2 s (took ${elapsed} ms)`)
  t.match(auditLines('crl_loaded').at(-1), { crl_number: /^\d+$/ })
  t.ok(Number(auditLines('crl_loaded').at(-1)?.crl_number) < 1000, 'a lower number than the refused CRL carried')
  t.equal((await request(ctl.port, pki.ca, nodeB, '/v1/keys')).status, 200, 'node-b still served')
})

t.test('a CRL valid only in a few seconds waits as pending, handshakes keep working, then it is installed by itself', async (t) => {
  const nodeE = await bundle(pki, 'node-e', 'node')
  t.equal((await request(ctl.port, pki.ca, nodeE, '/v1/keys')).status, 200)
  // The CA host's clock runs 5 s ahead: the CRL it writes is not valid yet here.
  const { crlNumber } = await revoke(pki.dir, { name: 'node-e' }, { now: new Date(Date.now() + 5000) })
  t.ok((await within(2000, () => auditLines('crl_pending').length > 0)) >= 0, 'crl_pending audited within 2 s')
  const pending = auditLines('crl_pending').at(-1)
  t.match(pending, { crl_number: String(crlNumber), this_update: String })
  const validFrom = Date.parse(pending?.this_update)
  t.ok(Date.now() < validFrom, 'still before its thisUpdate')
  t.equal((await request(ctl.port, pki.ca, nodeB, '/v1/keys')).status, 200, 'handshakes keep working (no CRL_NOT_YET_VALID)')
  t.equal((await request(ctl.port, pki.ca, nodeE, '/v1/keys')).status, 200, 'the old CRL is in force: node-e not revoked yet')
  t.ok(Date.now() < validFrom, 'and both answers came before its thisUpdate')
  const loadedLine = () => auditLines('crl_loaded').find((e) => e.crl_number === String(crlNumber))
  const installed = await within(validFrom - Date.now() + 2000, () => loadedLine() !== undefined)
  t.ok(installed >= 0, 'installed once valid, with no file change')
  t.ok(Date.parse(loadedLine()?.time) >= validFrom, 'not before its thisUpdate (audit line time)')
  await t.rejects(request(ctl.port, pki.ca, nodeE, '/v1/keys'), 'node-e refused now')
  t.equal((await request(ctl.port, pki.ca, nodeB, '/v1/keys')).status, 200, 'node-b still served')
})

t.test('every audit event kind comes from a real action, and audit-verify checks the chain', async (t) => {
  const older = await bundle(pki, 'node-c', 'node', { notBefore: new Date(Date.now() - 7_200_000), outDir: join(root, 'c-old') })
  const current = await bundle(pki, 'node-c', 'node', { notBefore: new Date(Date.now() - 3_600_000), outDir: join(root, 'c-cur') })
  const newer = await bundle(pki, 'node-c', 'node', { notBefore: new Date(Date.now() - 60_000), outDir: join(root, 'c-new') })
  const post = (id: typeof op, path: string, body: unknown) => request(ctl.port, pki.ca, id, path, { body })
  await post(current, '/v1/checkin', checkinBody('node-c'))
  await post(older, '/v1/checkin', checkinBody('node-c')) // identity_conflict
  await post(newer, '/v1/checkin', checkinBody('node-c')) // identity_rotated
  await post(nodeB, '/v1/checkin', checkinBody('node-c')) // identity_mismatch
  await post(nodeB, '/v1/checkin', checkinBody('node-b'))
  await post(newer, '/v1/checkin', checkinBody('node-c'))
  const plan = await request(ctl.port, pki.ca, op, '/v1/plan')
  const range = (id: string) => plan.json.nodes.find((n: { node_id: string }) => n.node_id === id)
  // The live nodes apply the current plan (releasing what they owe); the shards revoked node-a held wait
  // for its lease (30 s) all the same: the first shard of node-b or node-c that does not is granted.
  await post(nodeB, '/v1/checkin', checkinBody('node-b', { generation: plan.json.generation }))
  await post(newer, '/v1/checkin', checkinBody('node-c', { generation: plan.json.generation }))
  let granted = null
  for (const [id, name] of [[nodeB, 'node-b'], [newer, 'node-c']] as const) {
    for (let shard = range(name).range_start; shard < range(name).range_start + range(name).range_count && granted?.json.granted !== true; shard++) {
      granted = await post(id, '/v1/identify', { node_id: name, shard_id: shard })
    }
  }
  t.equal(granted?.json.granted, true, `identify_granted: ${granted?.text}`)
  const stolen = await post(nodeB, '/v1/identify', { node_id: 'node-b', shard_id: range('node-c').range_start })
  t.equal(stolen.json.error, 'not_owner')
  await post(op, '/v1/nodes/node-b/drain', { draining: false }) // drain_set
  const noCert = await request(ctl.port, pki.ca, null, '/v1/keys').catch(() => null) // tls_rejected
  t.equal(noCert, null)
  // unauthenticated: our CA's certificate passes the handshake, but OU=admin is no role of the SPEC.
  const admin = opensslCert(pki, join(root, 'openssl'), 'admin', '/CN=ops-admin/OU=admin', ['extendedKeyUsage=clientAuth'])
  const refused = await request(ctl.port, pki.ca, admin, '/v1/plan')
  t.equal(refused.status, 401)
  t.equal(refused.json.error, 'unauthenticated')
  // crl_expiring: the operator publishes a CRL whose nextUpdate is 22 hours away (signed 2 hours ago, valid 1 day).
  const auditPath = join(root, 'audit.log')
  await writeCrl(pki.dir, { crlDays: 1, now: new Date(Date.now() - 2 * 3_600_000) })
  const warned = await within(2500, () => /"event":"crl_expiring"/.test(readFileSync(auditPath, 'utf8')))
  t.ok(warned >= 0, `crl_expiring audited within 2.5 s (took ${warned} ms)`)
  t.equal((await request(ctl.port, pki.ca, nodeB, '/v1/keys')).status, 200, 'the expiring CRL is in force and still lets valid nodes in')
  await ctl.running.stop() // controller_stop
  // A restart on the same files continues the audit chain; with 1 s leases the restored nodes expire.
  // Another max_concurrency than the state was written with: reshard. One connection per address: connection_refused.
  const short = await startTestController(pki, root, { total_shards: 32, max_concurrency: 2, lease_seconds: 1, max_connections_per_address: 1 }, UNLIMITED)
  const hog = connect(short.port, '127.0.0.1')
  await new Promise((resolve) => hog.once('connect', resolve))
  const dropped = await request(short.port, pki.ca, op, '/v1/plan').then(() => false, () => true)
  t.ok(dropped, 'a second connection from the same address is dropped (connection_refused)')
  hog.destroy()
  await new Promise((r) => setTimeout(r, 1600))
  await request(short.port, pki.ca, op, '/v1/plan') // node_expired
  await short.running.stop()
  const log = readFileSync(join(root, 'audit.log'), 'utf8')
  const events = new Set(log.trim().split('\n').map((l) => JSON.parse(l).event as string))
  // Every event kind the log knows, but audit_chain_resumed: that needs a torn log, which audit-verify
  // must refuse (test/audit/audit-log.test.ts makes one); the HA events (test/ha/ha-controller.test.ts);
  // the session-handoff events (test/e2e/session-handoff.test.ts); and the live-reshard events
  // (test/e2e/live-reshard.test.ts); the enrollment events (test/e2e/enroll.test.ts); and node_left
  // (test/e2e/leaving.test.ts).
  const elsewhere = ['node_left', 'audit_chain_resumed', 'leader_elected', 'leader_lost', 'fenced_write_refused', 'session_deposited', 'session_handed', 'session_deposit_refused', 'reshard_started', 'reshard_switched', 'reshard_aborted', 'enroll_requested', 'enroll_issued', 'enroll_denied', 'enroll_refused']
  for (const kind of AUDIT_EVENTS.filter((e) => !elsewhere.includes(e))) t.ok(events.has(kind), `audit has ${kind}`)
  const lineOf = (kind: string) => log.split('\n').map((l) => (l ? JSON.parse(l) : {})).find((e) => e.event === kind)
  t.match(lineOf('unauthenticated'), { peer: '127.0.0.1', reason: /OU=\\?"?admin/, path: '/v1/plan' }, 'unauthenticated names the peer, why and what')
  t.match(lineOf('crl_expiring'), { next_update: String, ms_left: Number }, 'crl_expiring gives nextUpdate')
  // Refused handshakes carry OpenSSL's own reason and the peer address.
  const rejected = log.split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((e) => e.event === 'tls_rejected' && e.reason !== undefined)
  t.ok(rejected.some((e) => e.reason === 'CERT_REVOKED' && e.peer === '127.0.0.1'), 'the revoked certificate: CERT_REVOKED from 127.0.0.1')
  t.ok(rejected.some((e) => /CERTIFICATE|PEER_DID_NOT_RETURN/i.test(e.reason) && e.peer === '127.0.0.1'), `no certificate: ${rejected.map((e) => e.reason).join(', ')}`)
  t.ok(lineOf('crl_expiring').ms_left < 86_400_000, 'less than a day left')
  t.notMatch(log, /PRIVATE KEY/, 'no key material in the audit log')

  const ok = pkiCli('audit-verify', auditPath)
  t.equal(ok.status, 0, ok.stderr)
  const lines = log.trimEnd().split('\n')
  const variant = (name: string, ls: string[]) => {
    const p = join(root, name)
    writeFileSync(p, ls.join('\n') + '\n')
    return pkiCli('audit-verify', p)
  }
  const deleted = variant('deleted.log', [...lines.slice(0, 3), ...lines.slice(4)])
  t.not(deleted.status, 0)
  t.match(deleted.stdout + deleted.stderr, /line 4\b/, 'deletion named at the line after the gap')
  const edited = [...lines]
  edited[2] = edited[2]!.replace('"event":"', '"event":"x')
  const ed = variant('edited.log', edited)
  t.not(ed.status, 0)
  t.match(ed.stdout + ed.stderr, /line [34]\b/, 'edit named')
  const swapped = [...lines]
  ;[swapped[4], swapped[5]] = [swapped[5]!, swapped[4]!]
  const sw = variant('swapped.log', swapped)
  t.not(sw.status, 0)
  t.match(sw.stdout + sw.stderr, /line 5\b/, 'swap named')
})
