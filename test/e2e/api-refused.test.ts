// Refused paths over real mTLS: each gets the right outcome and changes nothing. "Nothing changed" is
// checked after EVERY refused request against the full GET /v1/plan answer, last_seen included: only an
// accepted check-in renews a lease, so a refused one must leave it byte for byte as it was.
import t, { type Test } from 'tap'
import https from 'node:https'
import { join } from 'node:path'
import { revoke } from '../../pki/toolkit.js'
import { bundle, checkinBody, makePki, opensslCert, request, startTestController, type Identity, type Reply, type RequestOptions } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
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
const noOu = opensslCert(pki, work, 'noou', '/CN=node-q', client)
// Multi-valued RDNs: a CN and an OU in one RDN must not read as an identity (nor give a second role).
const multiCnOu = opensslCert(pki, work, 'mvcnou', '/CN=node-m+OU=operator/OU=node', client, { multivalue: true })
const multiOuCn = opensslCert(pki, work, 'mvoucn', '/OU=node+CN=node-m', client, { multivalue: true })
const caTrue = opensslCert(pki, work, 'catrue', '/CN=node-c/OU=node', ['extendedKeyUsage=clientAuth', 'keyUsage=digitalSignature,keyCertSign', 'basicConstraints=critical,CA:true'])
const notYetValid = await bundle(pki, 'node-future', 'node', { notBefore: new Date(Date.now() + 86_400_000) })
// An intermediate CA under ours (pathlen:0 forbids it) and a node certificate it signed, sent with its chain.
const intermediate = opensslCert(pki, work, 'intermediate', '/CN=Rogue Intermediate', ['basicConstraints=critical,CA:true', 'keyUsage=critical,keyCertSign,cRLSign'])
const viaIntermediateLeaf = opensslCert(pki, work, 'via-intermediate', '/CN=node-i/OU=node', client, { caKey: join(work, 'intermediate.key'), caCert: join(work, 'intermediate.pem') })
const viaIntermediate: Identity = { cert: viaIntermediateLeaf.cert + intermediate.cert, key: viaIntermediateLeaf.key }
// A long lease: a slow machine must not expire node-a mid-file and make "unchanged" fail for the wrong reason.
const ctl = await startTestController(pki, root, { lease_seconds: 3600 })

// One keep-alive agent per identity that gets answers (the handshake failures use a fresh connection each).
const agents = new Map<Identity, https.Agent>()
for (const id of [node, other, op]) agents.set(id, new https.Agent({ keepAlive: true, maxSockets: 1 }))
t.teardown(async () => {
  for (const a of agents.values()) a.destroy()
  await ctl.running.stop()
})

const send = (id: Identity | null, path: string, opts: RequestOptions = {}): Promise<Reply> =>
  request(ctl.port, pki.ca, id, path, { ...opts, agent: (id && agents.get(id)) || undefined })
const post = (id: Identity | null, path: string, body: unknown) => send(id, path, { body })
/** The full operator view: generation, every node with its range, counts and last_seen. */
const snapshot = async () => {
  const res = await send(op, '/v1/plan')
  if (res.status !== 200) throw new Error(`GET /v1/plan failed: ${res.status} ${res.text}`)
  return res.json
}

const first = await post(node, '/v1/checkin', checkinBody('node-a'))
if (first.status !== 200) throw new Error(`setup check-in failed: ${first.text}`)
/** What the plan must look like after any refused request; updated only by accepted ones. */
let expected = await snapshot()
if (expected.nodes.length !== 1 || expected.nodes[0].range_count !== 16) throw new Error(`unexpected setup plan: ${JSON.stringify(expected)}`)

/** Asserts that the plan (generation, nodes, ranges, counts, last_seen) is exactly as before. */
async function unchanged(t: Test, label: string): Promise<void> {
  t.strictSame(await snapshot(), expected, `${label}: plan, generation and last_seen unchanged`)
}

type Case = { label: string; status: number; error: string } & ({ body: unknown } | { raw: string; contentType?: string })

/** Sends each case as `id` to `path`; checks status, code, a safe message, and that nothing changed. */
async function refuse(t: Test, id: Identity, path: string | ((c: Case) => string), cases: Case[]): Promise<void> {
  for (const c of cases) {
    const target = typeof path === 'string' ? path : path(c)
    const res = 'body' in c ? await send(id, target, { body: c.body }) : await send(id, target, { rawBody: c.raw, contentType: c.contentType })
    t.equal(res.status, c.status, `${c.label}: status`)
    t.equal(res.json?.error, c.error, `${c.label}: error code`)
    t.type(res.json?.message, 'string', `${c.label}: a message`)
    t.notMatch(res.text, /\n\s+at |\/work\/|node_modules|\.ts\b/, `${c.label}: no stack trace or path`)
    await unchanged(t, c.label)
  }
}

const bad400 = (label: string, body: unknown): Case => ({ label, body, status: 400, error: 'invalid_request' })
const raw400 = (label: string, raw: string): Case => ({ label, raw, status: 400, error: 'invalid_request' })
/** The shared non-body cases: null, array, empty, non-JSON, wrong content type, too large. */
const framing = (good: Record<string, unknown>): Case[] => [
  raw400('null body', 'null'),
  raw400('array body', JSON.stringify([good])),
  raw400('number body', '16'),
  raw400('empty body', ''),
  raw400('non-JSON', '{"node_id": '),
  { label: 'wrong content type', raw: JSON.stringify(good), contentType: 'text/plain', status: 415, error: 'unsupported_media_type' },
  { label: 'form content type', raw: 'node_id=node-a', contentType: 'application/x-www-form-urlencoded', status: 415, error: 'unsupported_media_type' },
  { label: '5 KiB body', raw: JSON.stringify({ ...good, pad: 'x'.repeat(5 * 1024) }), status: 413, error: 'payload_too_large' },
]

t.test('failed handshakes', async (t) => {
  for (const [label, id] of [
    ['no client certificate', null],
    ['a certificate from another CA', foreignNode],
    ['a certificate of our CA with only serverAuth', serverOnly],
    ['an expired certificate', expired],
    ['a certificate not yet valid', notYetValid],
    ['a certificate in the CRL', revoked],
    ['a certificate issued by an intermediate CA (pathlen:0)', viaIntermediate],
  ] as const) {
    await t.rejects(request(ctl.port, pki.ca, id, '/v1/checkin', { body: checkinBody('node-a') }), label)
    await unchanged(t, label)
  }
})

t.test('401 unauthenticated for identities the SPEC refuses', async (t) => {
  for (const [label, id] of [
    ['OU=admin', adminOu],
    ['CN breaking the name rule', badCn],
    ['two CNs', twoCn],
    ['a CN with a newline', newlineCn],
    ['no EKU at all', noEku],
    ['two OUs', twoOu],
    ['no OU (no role)', noOu],
    ['a CN sharing its RDN with an OU', multiCnOu],
    ['an OU sharing its RDN with the CN', multiOuCn],
    ['a CA certificate (CA:TRUE) as a client', caTrue],
  ] as const) {
    const res = await request(ctl.port, pki.ca, id, '/v1/checkin', { body: checkinBody('node-x') })
    t.equal(res.status, 401, label)
    t.same(res.json?.error, 'unauthenticated', label)
    await unchanged(t, label)
  }
})

t.test('403 for the wrong role and for acting as another node', async (t) => {
  const forbidden = (label: string, body: unknown): Case => ({ label, body, status: 403, error: 'forbidden' })
  const mismatch = (label: string, body: unknown): Case => ({ label, body, status: 403, error: 'identity_mismatch' })
  const res = await send(node, '/v1/plan')
  t.equal(res.status, 403, 'a node reading the plan')
  t.equal(res.json.error, 'forbidden')
  await unchanged(t, 'a node reading the plan')
  await refuse(t, node, '/v1/nodes/node-a/drain', [forbidden('a node draining', { draining: true })])
  await refuse(t, op, '/v1/checkin', [forbidden('an operator checking in', checkinBody('ops-bob'))])
  await refuse(t, op, '/v1/identify', [forbidden('an operator claiming', { node_id: 'ops-bob', shard_id: 0 })])
  await refuse(t, other, '/v1/checkin', [
    mismatch('node-b checking in as node-a', checkinBody('node-a')),
    mismatch('node-b checking in as node-a with a generation', checkinBody('node-a', { generation: 0 })),
  ])
  await refuse(t, other, '/v1/identify', [mismatch('node-b claiming as node-a', { node_id: 'node-a', shard_id: 0 })])
})

t.test('POST /v1/checkin: every bad body the SPEC names is refused and changes nothing', async (t) => {
  const gen: number = expected.generation
  const counts = ['ready_shards', 'starting_shards', 'backoff_shards', 'fatal_shards'] as const
  const numeric = ['capacity', ...counts, 'generation'] as const
  const required = ['node_id', 'capacity', ...counts] as const
  const without = (key: string) => {
    const body = checkinBody('node-a')
    delete body[key]
    return body
  }
  const cases: Case[] = [
    ...counts.flatMap((k) => [bad400(`${k} -1`, checkinBody('node-a', { [k]: -1 })), bad400(`${k} 129`, checkinBody('node-a', { [k]: 129 }))]),
    bad400('capacity 0', checkinBody('node-a', { capacity: 0 })),
    bad400('capacity 129', checkinBody('node-a', { capacity: 129 })),
    bad400('generation -1', checkinBody('node-a', { generation: -1 })),
    bad400('generation 0.5', checkinBody('node-a', { generation: 0.5 })),
    bad400(`generation ${gen + 1} (above the current ${gen})`, checkinBody('node-a', { generation: gen + 1 })),
    bad400('generation far above the current one', checkinBody('node-a', { generation: gen + 1_000_000 })),
    ...numeric.map((k) => bad400(`${k} a fraction`, checkinBody('node-a', { [k]: 1.5 }))),
    ...numeric.map((k) => bad400(`${k} a string number`, checkinBody('node-a', { [k]: k === 'capacity' ? '16' : '1' }))),
    ...numeric.map((k) => bad400(`${k} null`, checkinBody('node-a', { [k]: null }))),
    ...numeric.map((k) => bad400(`${k} a boolean`, checkinBody('node-a', { [k]: true }))),
    ...required.map((k) => bad400(`${k} missing`, without(k))),
    bad400('unknown field', checkinBody('node-a', { extra: 1 })),
    bad400('unknown field __proto__', JSON.parse(`{"__proto__": {"x": 1}, ${JSON.stringify(checkinBody('node-a')).slice(1)}`)),
    bad400('node_id a number', checkinBody('node-a', { node_id: 7 })),
    ...['../x', '-node-a', '.node-a', '', 'node a', 'node/a', 'n'.repeat(65), 'nöde'].map((id) => bad400(`node_id ${JSON.stringify(id)} breaks the name rule`, checkinBody(id))),
    bad400('a malformed body naming another node is 400, not 403', checkinBody('node-b', { capacity: 0 })),
    ...framing(checkinBody('node-a')),
  ]
  await refuse(t, node, '/v1/checkin', cases)
})

t.test('POST /v1/identify: bad bodies are refused and change nothing', async (t) => {
  const total: number = expected.total_shards
  const cases: Case[] = [
    bad400('unknown field', { node_id: 'node-a', shard_id: 1, extra: 1 }),
    bad400('shard_id -1', { node_id: 'node-a', shard_id: -1 }),
    bad400(`shard_id = total_shards (${total})`, { node_id: 'node-a', shard_id: total }),
    bad400('shard_id 65536', { node_id: 'node-a', shard_id: 65536 }),
    bad400('shard_id a fraction', { node_id: 'node-a', shard_id: 1.5 }),
    bad400('shard_id a string number', { node_id: 'node-a', shard_id: '1' }),
    bad400('shard_id null', { node_id: 'node-a', shard_id: null }),
    bad400('shard_id missing', { node_id: 'node-a' }),
    bad400('node_id missing', { shard_id: 1 }),
    bad400('node_id breaking the name rule', { node_id: '../x', shard_id: 1 }),
    ...framing({ node_id: 'node-a', shard_id: 1 }),
  ]
  await refuse(t, node, '/v1/identify', cases)
  // No refused claim recorded a grant: the first valid claim on shard 0's bucket is granted at once.
  const claim = await post(node, '/v1/identify', { node_id: 'node-a', shard_id: 0 })
  t.match(claim.json, { granted: true, shard_id: 0 }, 'a valid claim afterwards is granted: no refused claim took the bucket')
  await unchanged(t, 'a granted claim')
})

t.test('POST /v1/nodes/:node_id/drain: bad bodies and names are refused and change nothing', async (t) => {
  const cases: (Case & { node?: string })[] = [
    bad400('draining "yes"', { draining: 'yes' }),
    bad400('draining "true"', { draining: 'true' }),
    bad400('draining 1', { draining: 1 }),
    bad400('draining null', { draining: null }),
    bad400('unknown field', { draining: true, extra: 1 }),
    bad400('draining missing', {}),
    ...framing({ draining: true }),
    ...['-evil', '..', '.hidden', 'n'.repeat(65), 'a%20b', '%2e%2e'].map((id) => ({ ...bad400(`node_id ${JSON.stringify(id)} in the path`, { draining: true }), node: id })),
  ]
  await refuse(t, op, (c) => `/v1/nodes/${(c as { node?: string }).node ?? 'node-a'}/drain`, cases)
})

t.test('rotation and identity conflict', async (t) => {
  const version = (n: number, agoMs: number) => bundle(pki, 'node-r', 'node', { notBefore: new Date(Date.now() - agoMs), outDir: join(root, `rotation-${n}`) })
  const older = await version(1, 3_600_000)
  const current = await version(2, 1_800_000)
  const newer = await version(3, 60_000)
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const as = (id: Identity, body: unknown) => request(ctl.port, pki.ca, id, '/v1/checkin', { body, agent })
  const nodeR = (plan: any) => plan.nodes.find((n: any) => n.node_id === 'node-r')

  t.equal((await as(current, checkinBody('node-r'))).status, 200)
  expected = await snapshot()
  const before = nodeR(expected)
  t.match(before, { capacity: 16, range_count: 16 }, 'node-r is live with the current certificate')

  // An older certificate asking for another capacity: refused, and the record keeps the current one's effect.
  const conflict = await as(older, checkinBody('node-r', { capacity: 8, ready_shards: 3 }))
  t.equal(conflict.status, 409)
  t.equal(conflict.json.error, 'identity_conflict')
  await unchanged(t, 'identity_conflict (older certificate)')
  t.strictSame(nodeR(await snapshot()), before, 'node-r keeps its capacity, range, counts and last_seen')
  t.equal((await as(current, checkinBody('node-r'))).status, 200, 'the certificate on record is still the current one')
  expected = await snapshot()

  const rotated = await as(newer, checkinBody('node-r'))
  t.equal(rotated.status, 200, 'a strictly newer certificate is a rotation')
  expected = await snapshot()
  const replay = await as(current, checkinBody('node-r', { capacity: 8 }))
  t.equal(replay.status, 409, 'the superseded certificate is now refused')
  t.equal(replay.json.error, 'identity_conflict')
  await unchanged(t, 'identity_conflict (superseded certificate)')
})

t.test('unknown endpoints are 404 after authentication, 401 before', async (t) => {
  const res = await send(op, '/v1/nope')
  t.equal(res.status, 404)
  t.equal(res.json.error, 'not_found')
  const anon = await request(ctl.port, pki.ca, adminOu, '/v1/nope')
  t.equal(anon.status, 401)
  await unchanged(t, 'unknown endpoints')
})
