// POST /v1/crl over real mTLS, with a controller that reads an exported copy of crl.pem (so pxe-pki revoke
// alone does not reach it): a pushed CRL takes effect at once (connections closed, node removed), is kept
// in state_dir and survives a restart; every refusal names its reason and changes nothing, in memory or on disk.
import t from 'tap'
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import https from 'node:https'
import { join } from 'node:path'
import { revoke } from '../../pki/revocation.js'
import { craftCrl, EXTENSION_VALUES } from '../identity/crl-craft.js'
import { bundle, checkinBody, makePki, request, startTestController, type TestController } from './harness.js'
import { testDir } from '../support/test-dir.js'
import { auditLinesOf, pushCrl, within } from '../support/crl-push.js'

const root = testDir(t)
const pki = await makePki(root)
const foreign = await makePki(join(root, 'foreign'))
const [nodeA, nodeB, nodeC, op] = await Promise.all([bundle(pki, 'node-a', 'node'), bundle(pki, 'node-b', 'node'), bundle(pki, 'node-c', 'node'), bundle(pki, 'ops-alice', 'operator')])
// The controller reads a copy, as a controller host does after export-controller.
const copy = join(root, 'controller-crl.pem')
copyFileSync(join(pki.dir, 'crl.pem'), copy)
const firstCrl = readFileSync(copy, 'utf8')
const pushedPath = join(root, 'state', 'pushed-crl.pem')
const settings = { total_shards: 32, max_concurrency: 1, tls: { ca: join(pki.dir, 'ca.pem'), cert: join(pki.dir, 'server.pem'), key: join(pki.dir, 'server-key.pem'), crl: copy } }
let ctl: TestController = await startTestController(pki, root, settings)
t.teardown(() => ctl.running.stop())
const audit = (event: string) => auditLinesOf(join(root, 'audit.log'), event)
const refusedHandshake = (id: typeof nodeA) => request(ctl.port, pki.ca, id, '/v1/keys').then(() => false, () => true)

t.test('a good CRL pushed by an operator: the revoked node is refused within 2 s and its open connection closed', async (t) => {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  t.equal((await request(ctl.port, pki.ca, nodeA, '/v1/checkin', { body: checkinBody('node-a'), agent })).status, 200)
  t.equal((await request(ctl.port, pki.ca, nodeB, '/v1/checkin', { body: checkinBody('node-b') })).status, 200)
  const socket = Object.values(agent.freeSockets).flat()[0]!
  let closed = false
  socket.once('close', () => (closed = true))

  const out = join(root, 'push-1.pem')
  const { crlNumber } = await revoke(pki.dir, { name: 'node-a' }, { out })
  t.equal(readFileSync(copy, 'utf8'), firstCrl, 'the controller\'s copy is untouched by pxe-pki revoke')
  const res = await pushCrl(ctl.port, pki.ca, op, readFileSync(out))
  t.equal(res.status, 200, res.text)
  t.match(res.json, { crl_number: String(crlNumber), revoked: 1, changed: true, this_update: String, next_update: String })
  const elapsed = await within(2000, async () => {
    const plan = await request(ctl.port, pki.ca, op, '/v1/plan')
    return closed && !plan.json.nodes.some((n: { node_id: string }) => n.node_id === 'node-a')
  })
  t.ok(elapsed >= 0, `connection closed and node removed within 2 s (took ${elapsed} ms)`)
  t.ok(await refusedHandshake(nodeA), 'a new handshake of node-a is refused')
  t.equal((await request(ctl.port, pki.ca, nodeB, '/v1/keys')).status, 200, 'node-b is still served')
  t.match(audit('crl_loaded').at(-1), { source: 'push', by: 'ops-alice', crl_number: String(crlNumber), revoked: 1, closed_connections: 1, removed_nodes: ['node-a'] })
  t.equal(readFileSync(pushedPath, 'utf8'), readFileSync(out, 'utf8'), 'kept in state_dir')

  const again = await pushCrl(ctl.port, pki.ca, op, readFileSync(out), 'application/x-pem-file; charset=us-ascii')
  t.match(again.json, { crl_number: String(crlNumber), changed: false }, 'pushing the CRL in force again is a no-op')
})

t.test('refused pushes name the reason and change nothing', async (t) => {
  const inForce = readFileSync(pushedPath, 'utf8')
  const caKeyPem = readFileSync(join(pki.dir, 'ca-key.pem'), 'utf8')
  const now = Date.now()
  const future = craftCrl({ caCertPem: pki.ca, caKeyPem, thisUpdate: new Date(now + 3_600_000), nextUpdate: new Date(now + 86_400_000), extensions: [{ oid: '2.5.29.20', critical: false, value: EXTENSION_VALUES.crlNumber(1000) }] })
  // Valid now and newer, but 10 minutes from its nextUpdate: pushed, it would lock every client out then.
  const expiring = craftCrl({ caCertPem: pki.ca, caKeyPem, thisUpdate: new Date(now - 60_000), nextUpdate: new Date(now + 600_000), extensions: [{ oid: '2.5.29.20', critical: false, value: EXTENSION_VALUES.crlNumber(1001) }] })
  // Our CA's name and a newer number, signed with another CA's key: only the signature check can refuse it.
  const forged = craftCrl({ caCertPem: pki.ca, caKeyPem: readFileSync(join(foreign.dir, 'ca-key.pem'), 'utf8'), thisUpdate: new Date(now - 60_000), nextUpdate: new Date(now + 86_400_000), extensions: [{ oid: '2.5.29.20', critical: false, value: EXTENSION_VALUES.crlNumber(1002) }] })
  const garbage = `-----BEGIN ${'X'.repeat(200)}-----\nAAAA\n-----END ${'X'.repeat(200)}-----\n`
  const cases: Array<{ name: string; who?: typeof op; body: string | Buffer; type?: string; status: number; error: string; message: RegExp; reason?: string }> = [
    { name: 'a node certificate', who: nodeB, body: inForce, status: 403, error: 'forbidden', message: /role "node" may not call POST \/v1\/crl/ },
    { name: 'another CA', body: readFileSync(join(foreign.dir, 'crl.pem')), status: 400, error: 'invalid_request', message: /wrong_issuer/, reason: 'wrong_issuer' },
    { name: 'our CA\'s name, signed with another key', body: forged, status: 400, error: 'invalid_request', message: /bad_signature.*does not verify under the CA key/, reason: 'bad_signature' },
    { name: 'an older CRL number', body: firstCrl, status: 400, error: 'invalid_request', message: /older_crl.*older than/, reason: 'older_crl' },
    { name: 'a thisUpdate in the future', body: future, status: 400, error: 'invalid_request', message: /not_yet_valid.*in the future/, reason: 'not_yet_valid' },
    { name: 'less than an hour to its nextUpdate', body: expiring, status: 400, error: 'invalid_request', message: /expires_soon.*less than an hour away/, reason: 'expires_soon' },
    { name: 'garbage', body: garbage, status: 400, error: 'invalid_request', message: /malformed.*wrong PEM label/, reason: 'malformed' },
    { name: 'not PEM at all', body: Buffer.from([0x30, 0x82, 0xff, 0x00, 0x01]), status: 400, error: 'invalid_request', message: /malformed.*no PEM block/, reason: 'malformed' },
    { name: 'an empty body', body: '', status: 400, error: 'invalid_request', message: /empty/ },
    { name: 'a JSON content type', body: inForce, type: 'application/json', status: 415, error: 'unsupported_media_type', message: /application\/pkix-crl or application\/x-pem-file/ },
    { name: 'a body over 1 MiB', body: Buffer.alloc(1024 * 1024 + 1, 0x41), status: 413, error: 'payload_too_large', message: /larger than 1048576 bytes/ },
  ]
  for (const c of cases) {
    const refusedBefore = audit('crl_refused').length
    const res = await pushCrl(ctl.port, pki.ca, c.who ?? op, c.body, c.type)
    t.equal(res.status, c.status, `${c.name}: ${c.status}`)
    t.same(Object.keys(res.json ?? {}).sort(), ['error', 'message'], `${c.name}: {error, message}`)
    t.equal(res.json?.error, c.error, `${c.name}: ${c.error}`)
    t.match(res.json?.message, c.message, `${c.name}: the reason is in the message`)
    t.notOk(String(res.json?.message).includes('X'.repeat(65)), `${c.name}: no more than 64 characters of input quoted`)
    if (c.reason !== undefined) t.match(audit('crl_refused').at(-1), { source: 'push', by: 'ops-alice', reason: c.reason }, `${c.name}: audited as refused`)
    else t.equal(audit('crl_refused').length, refusedBefore, `${c.name}: refused before the CRL was judged`)
    t.equal(readFileSync(pushedPath, 'utf8'), inForce, `${c.name}: the stored copy is unchanged`)
    t.ok(await refusedHandshake(nodeA), `${c.name}: node-a's revocation still in force`)
    t.equal((await request(ctl.port, pki.ca, nodeB, '/v1/keys')).status, 200, `${c.name}: node-b still served`)
  }
})

t.test('a restart keeps the pushed CRL in force; the older file is ignored until it is newer', async (t) => {
  await ctl.running.stop()
  ctl = await startTestController(pki, root, settings)
  t.ok(await refusedHandshake(nodeA), 'node-a is refused after the restart (its revocation was only pushed)')
  t.equal((await request(ctl.port, pki.ca, nodeC, '/v1/keys')).status, 200, 'node-c is served')
  const refusedBefore = audit('crl_refused').length
  await new Promise((resolve) => setTimeout(resolve, 600)) // three file checks at a 200 ms tick
  t.equal(audit('crl_refused').length, refusedBefore, 'the unchanged older file is not refused again at every start')

  // the operator replaces the copy with an older CRL: refused, as a file change always was
  writeFileSync(copy, firstCrl + '\n')
  t.ok((await within(2000, () => audit('crl_refused').length > refusedBefore)) >= 0, 'an older file is refused')
  t.match(audit('crl_refused').at(-1), { source: 'file', reason: 'older_crl' })
  t.ok(await refusedHandshake(nodeA), 'node-a still refused')

  // a newer CRL in the file still applies (never-lower rule, whichever way it came)
  await revoke(pki.dir, { name: 'node-c' }, { out: copy })
  t.ok((await within(2000, refusedHandshake.bind(null, nodeC))) >= 0, 'the file\'s newer CRL revokes node-c within 2 s')
  t.match(audit('crl_loaded').at(-1), { source: 'file', revoked: 2 })
  t.ok(existsSync(pushedPath))
})

t.test('a damaged pushed copy stops the start with what to do, changing nothing', async (t) => {
  await ctl.running.stop()
  const kept = readFileSync(pushedPath, 'utf8')
  writeFileSync(pushedPath, kept.replace(/[A-Za-z]{8}\n/, 'AAAAAAAA\n'))
  await t.rejects(startTestController(pki, root, settings), /pushed-crl\.pem \(the last CRL pushed with POST \/v1\/crl\) is not a CRL signed by the configured CA .*remove that file and start again; nothing was changed/)
  writeFileSync(pushedPath, kept)
  ctl = await startTestController(pki, root, settings)
  t.ok(await refusedHandshake(nodeA), 'with the copy mended it starts, node-a still refused')
})

t.test('a push whose copy cannot be kept is answered 503 and installs nothing', async (t) => {
  const kept = readFileSync(pushedPath, 'utf8')
  const served = (await request(ctl.port, pki.ca, nodeB, '/v1/keys')).status
  // In place of the copy, a directory that is not empty: the rename over it fails (as root too, unlike a chmod).
  rmSync(pushedPath)
  mkdirSync(join(pushedPath, 'blocker'), { recursive: true })
  t.teardown(() => {
    rmSync(pushedPath, { recursive: true, force: true })
    writeFileSync(pushedPath, kept)
  })
  const loadedBefore = audit('crl_loaded').length
  const out = join(root, 'push-unkept.pem')
  await revoke(pki.dir, { name: 'node-b' }, { out })
  const res = await pushCrl(ctl.port, pki.ca, op, readFileSync(out))
  t.match([res.status, res.json], [503, { error: 'unavailable', message: /the CRL could not be stored \(\w+\); retry: the answer says whether it is in force/ }], res.text)
  t.equal((await request(ctl.port, pki.ca, nodeB, '/v1/keys')).status, served, 'node-b, revoked by the unkept CRL, is still served')
  t.equal(audit('crl_loaded').length, loadedBefore, 'nothing installed')
  t.same(readdirSync(join(root, 'state')).filter((f) => f.includes('pushed-crl') && f !== 'pushed-crl.pem'), [], 'no temporary file left beside it')
  t.same(readdirSync(pushedPath), ['blocker'], 'the directory in its place untouched')
})
