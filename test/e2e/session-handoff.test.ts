// Session handoff over real mTLS (SPEC "Session handoff"): a node that released shards by plan deposits
// their sessions in the release check-in; the new owner's claim is answered `mode: "resume"` once, with no
// bucket slot and no daily budget spent. Every bad deposit refuses the whole check-in and changes nothing
// (the plan, last_seen and reported generation included; the handoff stays pending; nothing is held).
// Last, the audit log and the operational log (at trace level) are scanned for every session ID sent.
import t, { type Test } from 'tap'
import https from 'node:https'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { bundle, checkinBody, makePki, opsMetric, request, startTestController, type Identity, type Reply, type RequestOptions } from './harness.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const nodeA = await bundle(pki, 'node-a', 'node')
const nodeB = await bundle(pki, 'node-b', 'node')
const op = await bundle(pki, 'ops-bob', 'operator')

let opsLog = ''
const logger = pino({ level: 'trace' }, new Writable({ write: (chunk, _e, done) => ((opsLog += String(chunk)), done()) }))
const DAILY = 1000
const ctl = await startTestController(
  pki,
  root,
  {
    lease_seconds: 3600,
    daily_identify_limit: DAILY,
    session_handoff: { allowed_hosts: ['gateway.discord.gg', '*.discord.gg', '127.0.0.1'], ttl_seconds: 300 },
  },
  { logger },
)
const agents = new Map<Identity, https.Agent>([nodeA, nodeB, op].map((id) => [id, new https.Agent({ keepAlive: true, maxSockets: 1 })]))
t.teardown(async () => {
  for (const a of agents.values()) a.destroy()
  await ctl.running.stop()
})

const send = (id: Identity, path: string, opts: RequestOptions = {}): Promise<Reply> => request(ctl.port, pki.ca, id, path, { ...opts, agent: agents.get(id) })
const post = (id: Identity, path: string, body: unknown) => send(id, path, { body })
const claim = (id: Identity, nodeId: string, shardId: number, extra: Record<string, unknown> = {}) => post(id, '/v1/identify', { node_id: nodeId, shard_id: shardId, ...extra })
const plan = async () => (await send(op, '/v1/plan')).json
const metric = (name: string): Promise<number> => opsMetric(ctl, name)
const auditEvents = () =>
  readFileSync(join(root, 'audit.log'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>)

// Every session ID this file sends, accepted or refused: none may appear in any log.
const sentSessionIds = new Set<string>()
let counter = 0
function session(shardId: number, over: Record<string, unknown> = {}): Record<string, unknown> {
  const id = `SeSsIoNsEcReT${(counter += 1)}x${shardId}`
  sentSessionIds.add(id)
  return { shard_id: shardId, session_id: id, sequence: 4711, resume_url: 'wss://gateway-us-east1-b.discord.gg', ...over }
}

// node-a alone holds all 64 shards; node-b joins and takes 32..63, which wait for node-a's release.
const capacity = { capacity: 64 }
const a1 = await post(nodeA, '/v1/checkin', checkinBody('node-a', capacity))
if (a1.status !== 200 || a1.json.range_count !== 64) throw new Error(`setup: ${a1.text}`)
const b1 = await post(nodeB, '/v1/checkin', checkinBody('node-b', capacity))
if (b1.status !== 200 || b1.json.range_start !== 32 || b1.json.range_count !== 32) throw new Error(`setup: ${b1.text}`)
const moveGeneration: number = b1.json.generation
const released = checkinBody('node-a', { ...capacity, generation: moveGeneration })

t.test('before the release: the new owner waits for the old one', async (t) => {
  const res = await claim(nodeB, 'node-b', 32)
  t.match(res.json, { granted: false, reason: 'handoff_pending' })
  t.equal(await metric('pxe_sessions_held'), 0)
})

/** The state a refused deposit must leave exactly as it was. */
const before = await plan()

async function unchanged(t: Test, label: string): Promise<void> {
  t.strictSame(await plan(), before, `${label}: plan, node-a's last_seen and reported generation unchanged`)
  t.match((await claim(nodeB, 'node-b', 32)).json, { granted: false, reason: 'handoff_pending' }, `${label}: the handoff is still pending`)
  t.equal(await metric('pxe_sessions_held'), 0, `${label}: no session held`)
}

type Bad = { label: string; body: unknown; status?: number; error?: string; id?: Identity; message?: RegExp }
const url = (resume_url: string) => [session(40, { resume_url })]
const badDeposits: Bad[] = [
  { label: 'a foreign host', body: { ...released, sessions: url('wss://evil.example.com') }, message: /resume_url names a host that session_handoff\.allowed_hosts does not admit/ },
  { label: 'a look-alike: an allowed name as a prefix', body: { ...released, sessions: url('wss://gateway.discord.gg.evil.com') } },
  { label: 'a look-alike: an allowed suffix without its dot', body: { ...released, sessions: url('wss://evildiscord.gg') } },
  { label: 'the bare domain under a wildcard', body: { ...released, sessions: url('wss://discord.gg') } },
  { label: 'a look-alike: user info before "@"', body: { ...released, sessions: url('wss://gateway.discord.gg@evil.com') }, message: /user name or password|does not admit/ },
  { label: 'a look-alike: Cyrillic letters (IDN)', body: { ...released, sessions: url('wss://gateway.dіscord.gg') }, message: /printable ASCII/ },
  { label: 'a look-alike: a trailing dot', body: { ...released, sessions: url('wss://gateway.discord.gg.') } },
  { label: 'a backslash the URL parser would turn into a slash', body: { ...released, sessions: url('wss://evil.com\\.discord.gg') }, message: /backslash/ },
  { label: 'a tab the URL parser would drop', body: { ...released, sessions: url('wss://gateway.disc\tord.gg') }, message: /printable ASCII/ },
  { label: 'ws:// to a non-loopback host', body: { ...released, sessions: url('ws://gateway.discord.gg') }, message: /must be wss:\/\// },
  { label: 'ws:// to a loopback host the list does not name', body: { ...released, sessions: url('ws://127.0.0.2:4567') } },
  { label: 'https:// instead of wss://', body: { ...released, sessions: url('https://gateway.discord.gg') }, message: /must be a wss:\/\/ URL/ },
  { label: 'a path and query', body: { ...released, sessions: url('wss://gateway.discord.gg/?v=10') }, message: /no path, query or fragment/ },
  { label: 'not a URL', body: { ...released, sessions: url('gateway.discord.gg') }, message: /not a URL/ },
  { label: 'a resume_url of 257 characters', body: { ...released, sessions: url(`wss://${'a'.repeat(240)}.discord.gg`.padEnd(257, 'g')) }, message: /at most 256/ },
  { label: 'a shard node-a kept (not released)', body: { ...released, sessions: [session(0)] }, message: /no pending handoff from this node/ },
  { label: 'a shard node-b never owned', id: nodeB, body: { ...checkinBody('node-b', { ...capacity, generation: moveGeneration }), sessions: [session(5)] }, message: /no pending handoff from this node/ },
  { label: 'a released shard, but the check-in does not report the generation', body: { ...checkinBody('node-a', capacity), sessions: [session(40)] }, message: /does not release shard 40/ },
  { label: 'a released shard, but an older generation reported', body: { ...checkinBody('node-a', { ...capacity, generation: moveGeneration - 1 }), sessions: [session(40)] }, message: /does not release shard 40/ },
  { label: 'a shard_id beyond total_shards', body: { ...released, sessions: [session(64)] }, message: /below total_shards \(64\)/ },
  { label: 'the same shard twice', body: { ...released, sessions: [session(40), session(40)] }, message: /listed twice/ },
  { label: 'a good entry and a bad one: refused whole', body: { ...released, sessions: [session(40), session(41, { resume_url: 'wss://evil.example.com' })] } },
  { label: 'a session ID with a dash', body: { ...released, sessions: [session(40, { session_id: 'abc-def' })] }, message: /letters and digits/ },
  { label: 'an empty session ID', body: { ...released, sessions: [session(40, { session_id: '' })] } },
  { label: 'a session ID of 129 characters', body: { ...released, sessions: [session(40, { session_id: 'A'.repeat(129) })] } },
  { label: 'a session ID as a number', body: { ...released, sessions: [session(40, { session_id: 12345 })] } },
  { label: 'a negative sequence', body: { ...released, sessions: [session(40, { sequence: -1 })] } },
  { label: 'a sequence of 2^53', body: { ...released, sessions: [session(40, { sequence: 2 ** 53 })] } },
  { label: 'a fractional sequence', body: { ...released, sessions: [session(40, { sequence: 1.5 })] } },
  { label: 'a sequence as a string', body: { ...released, sessions: [session(40, { sequence: '4711' })] } },
  { label: 'an entry without resume_url', body: { ...released, sessions: [{ shard_id: 40, session_id: 'abc', sequence: 1 }] } },
  { label: 'an unknown field in an entry', body: { ...released, sessions: [session(40, { token: 'x' })] }, message: /unknown field "token"/ },
  { label: '129 entries', body: { ...released, sessions: Array.from({ length: 129 }, (_, i) => session(i % 64)) }, message: /at most 128/ },
  { label: 'sessions not an array', body: { ...released, sessions: session(40) } },
]

t.test('every bad deposit refuses the whole check-in and changes nothing', async (t) => {
  for (const c of badDeposits) {
    const res = await post(c.id ?? nodeA, '/v1/checkin', c.body)
    t.equal(res.status, c.status ?? 400, `${c.label}: status`)
    t.equal(res.json?.error, c.error ?? 'invalid_request', `${c.label}: error code`)
    if (c.message) t.match(res.json?.message, c.message, `${c.label}: the message names the rule`)
    t.notOk([...sentSessionIds].some((id) => res.text.includes(id)), `${c.label}: the answer does not echo a session ID`)
    t.notOk(res.text.includes('evil'), `${c.label}: the answer does not echo the URL`)
    await unchanged(t, c.label)
  }
})

t.test('a refused deposit names the shard it refused (so the node can send the rest again)', async (t) => {
  const res = await post(nodeA, '/v1/checkin', { ...released, sessions: [session(40), session(0), session(41)] })
  t.equal(res.status, 400)
  t.equal(res.json?.refused_shard_id, 0, 'shard 0: kept by node-a, no handoff to release')
  await unchanged(t, 'a deposit with one kept shard')
  const schema = await post(nodeA, '/v1/checkin', { ...released, sessions: [session(40, { sequence: -1 })] })
  t.equal(schema.json?.refused_shard_id, undefined, 'a malformed entry names no shard (the body is refused by its schema)')
})

t.test('body limits: 64 KiB with sessions, 4 KiB without', async (t) => {
  const pad = (bytes: number) => ' '.repeat(bytes)
  const over64 = `{"node_id":"node-a","capacity":64,"ready_shards":0,"starting_shards":0,"backoff_shards":0,"fatal_shards":0,"generation":${moveGeneration},"sessions":[${JSON.stringify(session(40))}]${pad(65_536)}}`
  const r1 = await send(nodeA, '/v1/checkin', { rawBody: over64 })
  t.equal(r1.status, 413, 'a check-in with sessions over 64 KiB')
  t.equal(r1.json?.error, 'payload_too_large')
  await unchanged(t, 'over 64 KiB')
  const over4 = JSON.stringify({ ...released }).replace(/}$/, `${pad(5000)}}`)
  const r2 = await send(nodeA, '/v1/checkin', { rawBody: over4 })
  t.equal(r2.status, 413, 'a check-in without sessions over 4 KiB')
  t.match(r2.json?.message, /larger than 4096 bytes \(65536 for one that carries sessions\)/)
  await unchanged(t, 'over 4 KiB without sessions')
  const emptyList = JSON.stringify({ ...released, sessions: [] }).replace(/}$/, `${pad(5000)}}`)
  const r4 = await send(nodeA, '/v1/checkin', { rawBody: emptyList })
  t.equal(r4.status, 413, 'an empty sessions list does not earn the larger limit')
  await unchanged(t, 'over 4 KiB with an empty sessions list')
  // 8 KiB with sessions (128 entries of long IDs need that much): accepted size, refused for its content here
  const big = { ...released, sessions: [session(40, { session_id: 'B'.repeat(128), resume_url: 'wss://evil.example.com' })] }
  const r3 = await send(nodeA, '/v1/checkin', { rawBody: JSON.stringify(big).replace(/}$/, `${pad(8000)}}`) })
  t.equal(r3.status, 400, 'a check-in with sessions of 8 KiB is read (and judged by its content)')
  await unchanged(t, '8 KiB with sessions')
})

const deposited = [session(32), session(33, { resume_url: 'ws://127.0.0.1:4567', sequence: 0 }), session(34), session(35, { sequence: Number.MAX_SAFE_INTEGER })]

t.test('a good deposit: accepted with the release, held, audited without values', async (t) => {
  const res = await post(nodeA, '/v1/checkin', { ...released, sessions: deposited })
  t.equal(res.status, 200, res.text)
  t.equal(await metric('pxe_sessions_held'), 4)
  const lines = auditEvents().filter((e) => e.event === 'session_deposited')
  t.same(lines.map((e) => e.shard_id), [32, 33, 34, 35])
  t.ok(lines.every((e) => e.node_id === 'node-a' && e.generation === moveGeneration && !('session_id' in e) && !('resume_url' in e)))
  const refused = auditEvents().filter((e) => e.event === 'session_deposit_refused')
  t.ok(refused.length >= 5, 'refused deposits were audited (limited per certificate)')
  t.ok(refused.every((e) => typeof e.rule === 'string' && !('resume_url' in e)), 'with the rule broken, never the values')
})

t.test('the hand-out: once, mode resume, no bucket slot, no daily budget', async (t) => {
  const budget = await metric('pxe_identify_daily_budget_remaining')
  const r32 = await claim(nodeB, 'node-b', 32)
  t.strictSame(r32.json, {
    granted: true,
    mode: 'resume',
    shard_id: 32,
    bucket: 0,
    generation: moveGeneration,
    session: { session_id: deposited[0]!.session_id, sequence: 4711, resume_url: 'wss://gateway-us-east1-b.discord.gg' },
  })
  t.match((await claim(nodeB, 'node-b', 33)).json, { granted: true, mode: 'resume', bucket: 1, session: { sequence: 0, resume_url: 'ws://127.0.0.1:4567' } })
  t.match((await claim(nodeB, 'node-b', 35)).json, { granted: true, mode: 'resume', session: { sequence: Number.MAX_SAFE_INTEGER } })
  t.equal(await metric('pxe_identify_daily_budget_remaining'), budget, 'resumes spend no daily budget')
  // bucket 0 was not taken by the resume of 32: an Identify of 48 (bucket 0) is granted at once
  t.match((await claim(nodeB, 'node-b', 48)).json, { granted: true, mode: 'identify', bucket: 0 })
  t.equal(await metric('pxe_identify_daily_budget_remaining'), budget - 1, 'the Identify spent one')
  // handed out once: 32 again is an ordinary claim (bucket 0 now busy)
  t.match((await claim(nodeB, 'node-b', 32)).json, { granted: false, reason: 'bucket_busy' })
  t.equal(await metric('pxe_sessions_held'), 1)
  t.equal(await metric('pxe_identify_claims_total{result="resumed"}'), 3)
  const handed = auditEvents().filter((e) => e.event === 'session_handed')
  t.same(handed.map((e) => [e.node_id, e.shard_id]), [['node-b', 32], ['node-b', 33], ['node-b', 35]])
  t.notOk(auditEvents().some((e) => e.event === 'identify_granted' && [32, 33, 35].includes(e.shard_id as number)), 'no Identify grant for a resumed shard')
})

t.test('fresh: true discards the held session and claims an ordinary Identify', async (t) => {
  const res = await claim(nodeB, 'node-b', 34, { fresh: true })
  t.match(res.json, { granted: true, mode: 'identify', shard_id: 34, bucket: 2 })
  t.notOk('session' in res.json)
  t.equal(await metric('pxe_sessions_held'), 0)
  t.match((await claim(nodeB, 'node-b', 34)).json, { granted: false, reason: 'bucket_busy' }, 'the session is gone')
  const bad = await claim(nodeB, 'node-b', 36, { fresh: 'yes' })
  t.equal(bad.status, 400, 'fresh must be a boolean')
})

t.test('no session ID in the audit log or the operational log', async (t) => {
  const audit = readFileSync(join(root, 'audit.log'), 'utf8')
  t.ok(opsLog.length > 0, 'the operational log has lines')
  t.ok(sentSessionIds.size > 40, `${sentSessionIds.size} session IDs sent`)
  t.same([...sentSessionIds].filter((id) => audit.includes(id)), [], 'none in the audit log')
  t.same([...sentSessionIds].filter((id) => opsLog.includes(id)), [], 'none in the operational log')
  t.notOk(audit.includes('gateway-us-east1-b') || opsLog.includes('gateway-us-east1-b'), 'nor a resume URL')
  t.notOk(audit.includes('evil.example.com') || opsLog.includes('evil.example.com'), 'nor a refused one')
  const stateFiles = readdirSync(join(root, 'state'))
  t.ok(stateFiles.length > 0)
  const state = stateFiles.map((f) => readFileSync(join(root, 'state', f), 'utf8')).join('\n')
  t.same([...sentSessionIds].filter((id) => state.includes(id)), [], 'none in state_dir')
})
