// Refused paths over real mTLS: each gets the right outcome and changes nothing.
import t from 'tap'
import { join } from 'node:path'
import { revoke } from '../../pki/toolkit.js'
import { bundle, checkinBody, makePki, opensslCert, request, startTestController, type Identity } from './harness.js'

const root = t.testdir()
const work = join(root, 'openssl')
const pki = await makePki(root)
const foreign = await makePki(join(root, 'foreign'))
const node = await bundle(pki, 'node-a', 'node')
const other = await bundle(pki, 'node-b', 'node')
const op = await bundle(pki, 'ops-bob', 'operator')
const revoked = await bundle(pki, 'node-revoked', 'node')
const expired = await bundle(pki, 'node-expired', 'node', { notBefore: new Date(Date.now() - 10 * 86_400_000), days: 1 })
const foreignNode = await bundle(foreign, 'node-a', 'node')
await revoke(pki.dir, { serial: revoked.serial })
const client = ['extendedKeyUsage=clientAuth', 'keyUsage=digitalSignature,keyEncipherment', 'basicConstraints=CA:false']
const serverOnly = opensslCert(pki, work, 'server-only', '/CN=node-s/OU=node', ['extendedKeyUsage=serverAuth', 'basicConstraints=CA:false'])
const adminOu = opensslCert(pki, work, 'admin', '/CN=node-x/OU=admin', client)
const badCn = opensslCert(pki, work, 'badcn', '/CN=..evil/OU=node', client)
const twoCn = opensslCert(pki, work, 'twocn', '/CN=node-1/CN=node-2/OU=node', client)
const newlineCn = opensslCert(pki, work, 'nlcn', '/CN=node\na/OU=node', client)
const noEku = opensslCert(pki, work, 'noeku', '/CN=node-n/OU=node', ['basicConstraints=CA:false'])
const twoOu = opensslCert(pki, work, 'twoou', '/CN=node-o/OU=node/OU=operator', client)
const ctl = await startTestController(pki, root)
t.teardown(() => ctl.running.stop())

const post = (id: Identity | null, path: string, body: unknown) => request(ctl.port, pki.ca, id, path, { body })
const snapshot = async () => (await request(ctl.port, pki.ca, op, '/v1/plan')).json
const first = await post(node, '/v1/checkin', checkinBody('node-a'))
if (first.status !== 200) throw new Error(`setup check-in failed: ${first.text}`)
const baseline = await snapshot()

const strip = (p: any) => ({ ...p, nodes: p.nodes.map((n: any) => ({ ...n, last_seen: undefined })) })
/** The plan (generation, nodes, ranges) without last_seen, to compare with the baseline. */
const planState = async () => strip(await snapshot())
const expected = strip(baseline)

t.test('failed handshakes', async (t) => {
  for (const [label, id] of [
    ['no client certificate', null],
    ['a certificate from another CA', foreignNode],
    ['a certificate of our CA with only serverAuth', serverOnly],
    ['an expired certificate', expired],
    ['a certificate in the CRL', revoked],
  ] as const) {
    await t.rejects(request(ctl.port, pki.ca, id, '/v1/keys'), label)
  }
  t.same(await planState(), expected, 'plan and generation unchanged')
})

t.test('401 unauthenticated for identities the SPEC refuses', async (t) => {
  for (const [label, id] of [
    ['OU=admin', adminOu],
    ['CN breaking the name rule', badCn],
    ['two CNs', twoCn],
    ['a CN with a newline', newlineCn],
    ['no EKU at all', noEku],
    ['two OUs', twoOu],
  ] as const) {
    const res = await post(id, '/v1/checkin', checkinBody('node-x'))
    t.equal(res.status, 401, label)
    t.same(res.json?.error, 'unauthenticated', label)
  }
  t.same(await planState(), expected, 'plan and generation unchanged')
})

t.test('403 for the wrong role and for acting as another node', async (t) => {
  let res = await request(ctl.port, pki.ca, node, '/v1/plan')
  t.equal(res.status, 403)
  t.equal(res.json.error, 'forbidden')
  res = await post(node, '/v1/nodes/node-a/drain', { draining: true })
  t.equal(res.json.error, 'forbidden')
  res = await post(op, '/v1/checkin', checkinBody('ops-bob'))
  t.equal(res.json.error, 'forbidden')
  res = await post(op, '/v1/identify', { node_id: 'ops-bob', shard_id: 0 })
  t.equal(res.json.error, 'forbidden')
  res = await post(other, '/v1/checkin', checkinBody('node-a'))
  t.equal(res.status, 403)
  t.equal(res.json.error, 'identity_mismatch')
  res = await post(other, '/v1/identify', { node_id: 'node-a', shard_id: 0 })
  t.equal(res.json.error, 'identity_mismatch')
  t.same(await planState(), expected, 'plan and generation unchanged')
})

t.test('bad bodies are 400/413/415 and change nothing', async (t) => {
  const cases: [string, Record<string, unknown>][] = [
    ['unknown field', checkinBody('node-a', { extra: 1 })],
    ['capacity 0', checkinBody('node-a', { capacity: 0 })],
    ['capacity 129', checkinBody('node-a', { capacity: 129 })],
    ['ready_shards -1', checkinBody('node-a', { ready_shards: -1 })],
    ['starting_shards 129', checkinBody('node-a', { starting_shards: 129 })],
    ['backoff_shards 129', checkinBody('node-a', { backoff_shards: 129 })],
    ['fatal_shards -1', checkinBody('node-a', { fatal_shards: -1 })],
    ['fraction', checkinBody('node-a', { capacity: 1.5 })],
    ['string number', checkinBody('node-a', { capacity: '16' })],
    ['generation -1', checkinBody('node-a', { generation: -1 })],
    ['generation above the current one', checkinBody('node-a', { generation: baseline.generation + 1 })],
    ['missing field', { node_id: 'node-a', capacity: 4 }],
    ['node_id breaking the name rule', checkinBody('../x')],
    ['malformed body naming another node', checkinBody('node-b', { capacity: 0 })],
  ]
  for (const [label, body] of cases) {
    const res = await post(node, '/v1/checkin', body)
    t.equal(res.status, 400, label)
    t.equal(res.json.error, 'invalid_request', label)
    t.type(res.json.message, 'string')
  }
  let res = await request(ctl.port, pki.ca, node, '/v1/checkin', { rawBody: '{"node_id": ' })
  t.equal(res.status, 400, 'non-JSON')
  res = await request(ctl.port, pki.ca, node, '/v1/checkin', { rawBody: 'node_id=node-a', contentType: 'text/plain' })
  t.equal(res.status, 415)
  t.equal(res.json.error, 'unsupported_media_type')
  res = await request(ctl.port, pki.ca, node, '/v1/checkin', { rawBody: JSON.stringify(checkinBody('node-a', { pad: 'x'.repeat(5 * 1024) })) })
  t.equal(res.status, 413)
  t.equal(res.json.error, 'payload_too_large')
  for (const body of [{ node_id: 'node-a', shard_id: -1 }, { node_id: 'node-a', shard_id: 1.5 }, { node_id: 'node-a', shard_id: '1' }, { node_id: 'node-a' }, { node_id: 'node-a', shard_id: 1, x: 1 }]) {
    res = await post(node, '/v1/identify', body)
    t.equal(res.status, 400, JSON.stringify(body))
  }
  for (const body of [{}, { draining: 'yes' }, { draining: true, extra: 1 }]) {
    res = await post(op, '/v1/nodes/node-a/drain', body)
    t.equal(res.status, 400, JSON.stringify(body))
  }
  res = await post(op, '/v1/nodes/-evil/drain', { draining: true })
  t.equal(res.status, 400)
  t.notMatch(res.text, /at .*\.ts|\/work\//, 'no stack trace or path')
  t.same(await planState(), expected, 'plan and generation unchanged')
})

t.test('rotation and identity conflict', async (t) => {
  const version = (n: number, agoMs: number) => bundle(pki, 'node-r', 'node', { notBefore: new Date(Date.now() - agoMs), outDir: join(root, `rotation-${n}`) })
  const older = await version(1, 3_600_000)
  const current = await version(2, 1_800_000)
  const newer = await version(3, 60_000)
  t.equal((await post(current, '/v1/checkin', checkinBody('node-r'))).status, 200)
  const planBefore = await snapshot()
  const conflict = await post(older, '/v1/checkin', checkinBody('node-r', { capacity: 8 }))
  t.equal(conflict.status, 409)
  t.equal(conflict.json.error, 'identity_conflict')
  t.same(await snapshot().then((p) => p.generation), planBefore.generation, 'nothing changed')
  const rotated = await post(newer, '/v1/checkin', checkinBody('node-r'))
  t.equal(rotated.status, 200, 'a strictly newer certificate is a rotation')
  const replay = await post(current, '/v1/checkin', checkinBody('node-r'))
  t.equal(replay.status, 409, 'the superseded certificate is now refused')
})

t.test('unknown endpoints are 404 after authentication, 401 before', async (t) => {
  const res = await request(ctl.port, pki.ca, op, '/v1/nope')
  t.equal(res.status, 404)
  t.equal(res.json.error, 'not_found')
  const anon = await request(ctl.port, pki.ca, adminOu, '/v1/nope')
  t.equal(anon.status, 401)
})
