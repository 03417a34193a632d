// Identify claims are served only to the certificate the node's record holds (SPEC "Identify claims"),
// over real mTLS with certificates made at run time: node-a checks in with cert1; the operator re-issues
// node-a with `pxe-pki issue node-a --replace` (cert2, a later notBefore). Before cert2 checks in, its
// claims get 409 identity_conflict; after it checks in (a rotation), cert1's do: neither is granted nor
// handed the session deposited for a shard node-a owns, and neither takes a bucket (the right
// certificate's claim right after is granted). Each refusal is audited as identity_conflict with
// "endpoint": "identify"; a flood of them from cert1 is audited at most as the per-certificate limiter
// allows (the rest counted in a summary line) and answered 429 once cert1's rate limit is spent.
import t, { type Test } from 'tap'
import https from 'node:https'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { bundle, checkinBody, makePki, opsMetric, request, startTestController, type Identity, type Reply } from './harness.js'
import { testDir } from '../support/test-dir.js'

const PKI_CLI = fileURLToPath(new URL('../../dist/pki/cli.js', import.meta.url))
const root = testDir(t)
const pki = await makePki(root)
const op = await bundle(pki, 'ops-bob', 'operator')
const nodeB = await bundle(pki, 'node-b', 'node')
// cert1: node-a's certificate, issued an hour ago
const cert1 = await bundle(pki, 'node-a', 'node', { notBefore: new Date(Date.now() - 3_600_000), outDir: join(root, 'cert1') })

// node rate limit: a burst of 40 a certificate, then one a second (the flood below runs into it)
const BURST = 40
const ctl = await startTestController(pki, root, {
  total_shards: 64,
  max_concurrency: 16,
  lease_seconds: 3600,
  session_handoff: { allowed_hosts: ['gateway.discord.gg', '*.discord.gg'], ttl_seconds: 300 },
  rate_limits: { node: { per_second: 1, burst: BURST }, operator: { per_second: 100_000, burst: 100_000 } },
})
let stopped = false
const agents = new Map<Identity, https.Agent>()
t.teardown(async () => {
  for (const a of agents.values()) a.destroy()
  if (!stopped) await ctl.running.stop()
})
const agentOf = (id: Identity) => agents.get(id) ?? agents.set(id, new https.Agent({ keepAlive: true, maxSockets: 1 })).get(id)!
const post = (id: Identity, path: string, body: unknown): Promise<Reply> => request(ctl.port, pki.ca, id, path, { body, agent: agentOf(id) })
const claim = (id: Identity, shardId: number, extra: Record<string, unknown> = {}) => post(id, '/v1/identify', { node_id: 'node-a', shard_id: shardId, ...extra })
const plan = async () => (await request(ctl.port, pki.ca, op, '/v1/plan', { agent: agentOf(op) })).json
const held = () => opsMetric(ctl, 'pxe_sessions_held')
const audit = () =>
  readFileSync(join(root, 'audit.log'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, any>)

// node-b holds all 64 shards; node-a (cert1) joins and takes 0..31 (byte order), which node-b releases
// with the sessions of shards 0, 1 and 2 deposited: node-a's claims of them would be resumes.
const b0 = await post(nodeB, '/v1/checkin', checkinBody('node-b', { capacity: 64 }))
if (b0.status !== 200 || b0.json.range_count !== 64) throw new Error(`setup: ${b0.text}`)
const a0 = await post(cert1, '/v1/checkin', checkinBody('node-a', { capacity: 64 }))
if (a0.status !== 200 || a0.json.range_start !== 0 || a0.json.range_count !== 32) throw new Error(`setup: ${a0.text}`)
const moved: number = a0.json.generation
const deposited = [0, 1, 2].map((shard) => ({ shard_id: shard, session_id: `sess${shard}x${Date.now()}`, sequence: 100 + shard, resume_url: 'wss://gateway-us-east1-b.discord.gg' }))
const b1 = await post(nodeB, '/v1/checkin', checkinBody('node-b', { capacity: 64, generation: moved, sessions: deposited }))
if (b1.status !== 200 || (await held()) !== 3) throw new Error(`setup: the deposit: ${b1.text}`)

// The operator re-issues node-a, as for a planned rotation: cert2.
const issued = spawnSync(process.execPath, [PKI_CLI, 'issue', 'node-a', '--role', 'node', '--replace', '--dir', pki.dir, '--out', join(root, 'cert2')], { encoding: 'utf8' })
if (issued.status !== 0) throw new Error(`pxe-pki issue --replace: ${issued.stderr}`)
const cert2Serial = /issued node certificate ([0-9a-f]+)/.exec(issued.stdout)?.[1]
if (cert2Serial === undefined || !issued.stdout.includes(`replaces ${cert1.serial}`)) throw new Error(`pxe-pki issue --replace: ${issued.stdout}`)
const cert2: Identity & { serial: string } = {
  cert: readFileSync(join(root, 'cert2', 'node-a', 'cert.pem'), 'utf8'),
  key: readFileSync(join(root, 'cert2', 'node-a', 'key.pem'), 'utf8'),
  serial: cert2Serial,
}

/** A 409 identity_conflict in the error shape, with a message that says what to do. */
function conflict(t: Test, res: Reply, label: string): void {
  t.equal(res.status, 409, `${label}: status`)
  t.equal(res.json?.error, 'identity_conflict', `${label}: code`)
  t.match(res.json?.message, /node-a is live with another certificate/, `${label}: message`)
  t.notOk('granted' in (res.json ?? {}), `${label}: no grant`)
  t.notOk(res.text.includes('sess'), `${label}: no session in the answer`)
}

t.test('a newer certificate that has not checked in yet: 409 identity_conflict, nothing granted, handed or taken', async (t) => {
  const before = await plan()
  conflict(t, await claim(cert2, 5), 'an ordinary claim (bucket 5 free)')
  conflict(t, await claim(cert2, 0), 'a claim of a shard with a held session')
  conflict(t, await claim(cert2, 1, { fresh: true }), 'a fresh claim (would discard the held session)')
  conflict(t, await claim(cert2, 40), 'a claim of a shard node-a does not own: the certificate is checked first')
  t.equal(await held(), 3, 'every deposited session is still held')
  t.strictSame(await plan(), before, 'the plan, last_seen included, unchanged')
  // The record's certificate is still cert1: its claim of the same shard is granted at once (bucket 5 was not taken).
  const granted = await claim(cert1, 5)
  t.match(granted.json, { granted: true, mode: 'identify', shard_id: 5, bucket: 5 }, granted.text)
})

t.test('after the rotation: the superseded certificate is refused and never handed the session; the new one gets it', async (t) => {
  const rotated = await post(cert2, '/v1/checkin', checkinBody('node-a', { capacity: 64, generation: moved }))
  t.equal(rotated.status, 200, rotated.text)
  t.match(rotated.json, { range_start: 0, range_count: 32 })
  t.match(audit().filter((e) => e.event === 'identity_rotated'), [{ node_id: 'node-a', from_serial: cert1.serial, to_serial: cert2.serial }])

  const before = await plan()
  conflict(t, await claim(cert1, 0), 'cert1 claims a shard with a held session')
  conflict(t, await claim(cert1, 1, { fresh: true }), 'cert1 claims fresh')
  conflict(t, await claim(cert1, 6), 'cert1 claims an ordinary shard (bucket 6 free)')
  t.equal(await held(), 3, 'no session was handed out or discarded')
  t.strictSame(await plan(), before, 'nothing changed')
  t.equal((await post(cert1, '/v1/checkin', checkinBody('node-a', { capacity: 64 }))).status, 409, 'cert1 cannot check in again either')

  t.match((await claim(cert2, 6)).json, { granted: true, mode: 'identify', shard_id: 6, bucket: 6 }, 'bucket 6 was not taken by cert1')
  for (const entry of deposited) {
    const res = await claim(cert2, entry.shard_id)
    t.strictSame(
      res.json,
      { granted: true, mode: 'resume', shard_id: entry.shard_id, bucket: entry.shard_id, generation: rotated.json.generation, session: { session_id: entry.session_id, sequence: entry.sequence, resume_url: entry.resume_url } },
      `cert2 resumes shard ${entry.shard_id} with its deposited session`,
    )
  }
  t.equal(await held(), 0)
})

t.test('the audit log: identity_conflict with endpoint identify; no grant or hand-out for a refused claim', async (t) => {
  const lines = audit()
  const conflicts = lines.filter((e) => e.event === 'identity_conflict' && e.endpoint === 'identify')
  t.same(
    conflicts.map((e) => [e.serial, e.node_id, e.shard_id]),
    [[cert2.serial, 'node-a', 5], [cert2.serial, 'node-a', 0], [cert2.serial, 'node-a', 1], [cert2.serial, 'node-a', 40], [cert1.serial, 'node-a', 0], [cert1.serial, 'node-a', 1], [cert1.serial, 'node-a', 6]],
    'every refused claim, with the certificate that made it',
  )
  t.ok(conflicts.every((e) => typeof e.detail === 'string' && e.detail.includes('another certificate')))
  t.same(lines.filter((e) => e.event === 'identify_granted' && e.node_id === 'node-a').map((e) => e.shard_id), [5, 6], 'granted: cert1\'s 5 (before the rotation) and cert2\'s 6')
  t.same(lines.filter((e) => e.event === 'session_handed').map((e) => [e.node_id, e.shard_id]), [['node-a', 0], ['node-a', 1], ['node-a', 2]], 'each session handed once, to cert2\'s claims')
  t.equal(lines.filter((e) => e.event === 'identity_conflict' && e.endpoint === undefined && e.serial === cert1.serial).length, 1, 'cert1\'s refused check-in is audited too (without the endpoint)')
})

t.test('a flood of claims from the superseded certificate: audited within the limiter, then 429', async (t) => {
  const metricBefore = await opsMetric(ctl, 'pxe_identify_claims_total{result="identity_conflict"}')
  const started = Date.now()
  const statuses: number[] = []
  for (let i = 0; i < 80; i++) {
    const res = await claim(cert1, 7)
    statuses.push(res.status)
    if (res.status === 429) {
      t.equal(res.json.error, 'rate_limited')
      t.ok(res.json.retry_after_ms > 0 && res.json.retry_after_ms <= 1000, `retry_after_ms ${res.json.retry_after_ms}`)
      t.equal(res.headers['retry-after'], '1')
    } else t.equal(res.json?.error, 'identity_conflict', `claim ${i + 1}`)
  }
  const refused = statuses.filter((s) => s === 409).length
  const limited = statuses.filter((s) => s === 429).length
  t.equal(refused + limited, 80, 'each answered 409 or 429')
  // cert1 made 6 requests before (two check-ins, a grant, three refused claims), partly refilled since (1 a second)
  t.ok(refused >= BURST - 6 && refused <= BURST + 1 + Math.ceil((Date.now() - started) / 1000), `${refused} answered 409 until the burst was spent`)
  t.ok(limited >= 80 - BURST, `${limited} answered 429`)
  t.equal(statuses.indexOf(429) > 0 && statuses.slice(0, statuses.indexOf(429)).every((s) => s === 409), true, '409s until the limit, then 429s')
  t.equal(await opsMetric(ctl, 'pxe_identify_claims_total{result="identity_conflict"}'), metricBefore + refused, 'the claims metric counts the refusals (not the limited ones)')
  t.match((await claim(cert2, 7)).json, { granted: true, mode: 'identify', shard_id: 7, bucket: 7 }, 'cert2 is not limited by cert1\'s flood, and bucket 7 was free')
  const elapsedMs = Date.now() - started

  await ctl.running.stop() // writes the summary of whatever the limiter held back
  stopped = true
  const fromCert1 = audit().filter((e) => e.event === 'identity_conflict' && e.serial === cert1.serial)
  const detailed = fromCert1.filter((e) => e.suppressed === undefined)
  const summaries = fromCert1.filter((e) => e.suppressed !== undefined)
  // 4 conflicts before the flood (three claims, one check-in), in the same one-minute window unless this test is slow
  const windows = 1 + Math.floor((elapsedMs + 60_000) / 60_000)
  t.ok(detailed.length <= 5 * windows, `${detailed.length} detailed lines from cert1: at most 5 a minute`)
  t.ok(detailed.length >= 5, 'the limiter wrote its five')
  const suppressed = summaries.reduce((sum, e) => sum + (e.suppressed as number), 0)
  t.equal(detailed.length + suppressed, 4 + refused, 'every 409 is audited or counted in a summary; no 429 is')
  t.ok(summaries.length >= 1, 'a summary line counts the rest')
})
