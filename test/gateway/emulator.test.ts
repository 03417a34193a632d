// The gateway emulator's rules, each broken on purpose by a bare WebSocket client: what it answers,
// that it closes as Discord does, and that every breach is recorded.
import t, { type Test } from 'tap'
import { startGatewayEmulator, type GatewayEmulator } from '../support/gateway/gateway-emulator.js'
import type { GatewayEmulatorOptions } from '../support/gateway/emulator-options.js'
import { RawGatewayClient, type GatewayPayload } from '../support/gateway/raw-gateway-client.js'

async function emulator(t: Test, options: GatewayEmulatorOptions = {}): Promise<GatewayEmulator> {
  const e = await startGatewayEmulator({ eventsPerSecond: 0, ...options })
  t.teardown(() => e.stop())
  return e
}

/** A connection that has identified as `shard`; its READY's session ID. */
async function identified(e: GatewayEmulator, shard?: [number, number]): Promise<{ client: RawGatewayClient; sessionId: string; ready: GatewayPayload }> {
  const client = await RawGatewayClient.connect(e.url)
  await client.next((p) => p.op === 10)
  client.identify({ token: e.token, ...(shard ? { shard } : {}) })
  const ready = await client.dispatch('READY')
  return { client, sessionId: (ready.d as { session_id: string }).session_id, ready }
}

/** The test events a client received, as checkDelivery takes them. */
function entries(e: GatewayEmulator, shardId: number, ...clients: RawGatewayClient[]) {
  return clients.flatMap((c) => c.received.map((p) => e.deliveryEntry(shardId, p)).filter((x) => x !== null))
}

const kinds = (e: GatewayEmulator) => e.breaches.map((b) => b.kind)

/** Waits until the emulator has seen a session reach `state` (a client's close completes on both ends at slightly different times). */
async function reaches(t: Test, e: GatewayEmulator, sessionId: string, state: string): Promise<void> {
  await e.waitFor(() => e.session(sessionId)?.state === state, { what: `session ${sessionId} to be ${state}` })
  t.pass(`session is ${state}`)
}

t.test('GET /api/v10/gateway/bot: the shape, and 401 without the bot token', async (t) => {
  const e = await emulator(t, { shardCount: 4, maxConcurrency: 2, sessionStartLimit: { total: 1000, remaining: 990, resetAfter: 60_000 } })
  const ok = await fetch(`${e.apiUrl}/v10/gateway/bot`, { headers: { authorization: `Bot ${e.token}` } })
  t.equal(ok.status, 200)
  const body = (await ok.json()) as { url: string; shards: number; session_start_limit: Record<string, number> }
  t.equal(body.url, e.url)
  t.match(body.url, /^ws:\/\/127\.0\.0\.1:\d+$/)
  t.equal(body.shards, 4)
  t.match(body.session_start_limit, { total: 1000, remaining: 990, max_concurrency: 2 })
  t.ok((body.session_start_limit.reset_after ?? 0) > 0 && (body.session_start_limit.reset_after ?? 0) <= 60_000)
  for (const authorization of ['Bot wrong', e.token, undefined]) {
    const res = await fetch(`${e.apiUrl}/v10/gateway/bot`, { headers: authorization ? { authorization } : {} })
    t.equal(res.status, 401, `Authorization: ${authorization ?? '(none)'}`)
    t.same(await res.json(), { message: '401: Unauthorized', code: 0 })
  }
  const plain = await fetch(`${e.apiUrl}/v10/gateway`)
  t.same(await plain.json(), { url: e.url })
  t.equal((await fetch(`${e.apiUrl}/v9/gateway/bot`)).status, 404)
  t.equal(e.stats.gatewayBotRequests, 4)
})

t.test('HELLO, heartbeat and ACK; a missed heartbeat closes 4009 and leaves the session resumable', async (t) => {
  const e = await emulator(t, { heartbeatIntervalMs: 150, heartbeatGraceMs: 150 })
  const client = await RawGatewayClient.connect(e.url, { autoHeartbeat: false })
  const hello = await client.next()
  t.same(hello, { op: 10, d: { heartbeat_interval: 150 }, s: null, t: null })
  client.identify({ token: e.token })
  const ready = await client.dispatch('READY')
  client.heartbeat()
  t.same(await client.next((p) => p.op === 11), { op: 11, d: null, s: null, t: null })
  // No more heartbeats.
  t.equal((await client.closed).code, 4009)
  t.same(kinds(e), ['heartbeat_miss'])
  t.match(e.breaches[0], { kind: 'heartbeat_miss', shardId: 0, sessionId: (ready.d as { session_id: string }).session_id })
  t.equal(e.sessions()[0]?.state, 'disconnected')
})

t.test('IDENTIFY refusals: 4004, 4010, 4011, 4013, 4014, and none of them starts a session', async (t) => {
  const e = await emulator(t, { guildCount: 6, guildsPerShardLimit: 2, shardCountMultiple: 3, allowedPrivilegedIntents: 0, identifyWindowMs: 0 })
  const cases: Array<[string, { token?: string; shard?: [number, number]; intents?: number }, number]> = [
    ['wrong token', { token: 'nope', shard: [0, 3] }, 4004],
    ['shard id past the count', { shard: [3, 3] }, 4010],
    ['negative shard id', { shard: [-1, 3] }, 4010],
    ['count not a multiple of shardCountMultiple', { shard: [0, 4] }, 4010],
    ['no shard is [0, 1], not a multiple of 3', {}, 4010],
    ['an intent bit the docs do not list (1 << 17)', { shard: [0, 3], intents: 1 << 17 }, 4013],
    ['a privileged intent not enabled', { shard: [0, 3], intents: 1 << 15 }, 4014],
  ]
  for (const [name, options, code] of cases) {
    const client = await RawGatewayClient.connect(e.url)
    client.identify({ token: options.token ?? e.token, ...options })
    t.equal((await client.closed).code, code, name)
  }
  const e2 = await emulator(t, { guildCount: 6, guildsPerShardLimit: 2 })
  const crowded = await RawGatewayClient.connect(e2.url)
  crowded.identify({ token: e2.token, shard: [0, 2] })
  t.equal((await crowded.closed).code, 4011, '3 guilds on one shard of 2 with a limit of 2: sharding required')
  t.match(e2.breaches, [{ kind: 'protocol', closeCode: 4011, shardId: 0 }])
  t.match(e2.identifies, [{ shardId: 0, numShards: 2, outcome: 'closed', closeCode: 4011 }])
  const fits = await identified(e2, [1, 3])
  t.equal((fits.ready.d as { guilds: unknown[] }).guilds.length, 2)
  t.equal(e.sessions().length, 0)
  t.same(e.breaches.map((b) => (b.kind === 'protocol' ? b.closeCode : b.kind)), cases.map((c) => c[2]))
  t.equal(e.stats.sessionStartsRemaining, 1000, 'a refused IDENTIFY spends no session start')
})

t.test('protocol errors: 4001, 4002, 4003, 4005, 4012', async (t) => {
  const e = await emulator(t)
  const closeOf = async (act: (c: RawGatewayClient) => void, query?: string) => {
    const c = await RawGatewayClient.connect(e.url, query ? { query } : {})
    act(c)
    return (await c.closed).code
  }
  t.equal(await closeOf((c) => c.sendRaw('{not json')), 4002, 'not JSON')
  t.equal(await closeOf((c) => c.send({ op: 1, d: 'x'.repeat(5000) })), 4002, 'over 4096 bytes')
  t.equal(await closeOf((c) => c.send({ op: 5, d: null })), 4001, 'unknown opcode')
  t.equal(await closeOf((c) => c.send({ op: 2, d: { token: e.token } })), 4001, 'IDENTIFY without properties and intents')
  t.equal(await closeOf((c) => c.send({ op: 3, d: { status: 'online' } })), 4003, 'presence before IDENTIFY')
  t.equal(await closeOf(() => undefined, 'v=9&encoding=json'), 4012, 'API version 9')
  const { client } = await identified(e)
  client.identify({ token: e.token })
  t.equal((await client.closed).code, 4005, 'a second IDENTIFY')
  t.same(e.breaches.map((b) => (b.kind === 'protocol' ? b.closeCode : b.kind)), [4002, 4002, 4001, 4001, 4003, 4012, 4005])
})

t.test('one IDENTIFY per bucket per window, across connections: the second is answered INVALID_SESSION and recorded', async (t) => {
  const e = await emulator(t, { maxConcurrency: 2, identifyWindowMs: 1000 })
  await identified(e, [0, 4])
  const other = await identified(e, [1, 4]) // bucket 1: its own window
  t.ok(other.sessionId)
  const late = await RawGatewayClient.connect(e.url)
  late.identify({ token: e.token, shard: [2, 4] }) // bucket 0 again
  t.same(await late.next((p) => p.op === 9), { op: 9, d: false, s: null, t: null })
  t.match(e.breaches, [{ kind: 'bucket', shardId: 2, numShards: 4, bucket: 0 }])
  t.ok((e.breaches[0] as { sincePreviousMs: number }).sincePreviousMs < 1000)
  t.equal(e.stats.sessionsStarted.total, 2)
  t.equal(e.stats.sessionStartsRemaining, 998, 'the refused IDENTIFY spent nothing')
  // The connection stays open and unauthenticated: once the window has passed it may IDENTIFY again.
  await new Promise((resolve) => setTimeout(resolve, 1000))
  late.identify({ token: e.token, shard: [2, 4] })
  await late.dispatch('READY')
  t.same(e.identifies.map((i) => [i.shardId, i.bucket, i.outcome]), [[0, 0, 'ready'], [1, 1, 'ready'], [2, 0, 'bucket_refused'], [2, 0, 'ready']])
  t.equal(e.breaches.length, 1)
})

t.test('the session start limit: each IDENTIFY spends one; past it every session ends and the token is reset', async (t) => {
  const e = await emulator(t, { maxConcurrency: 2, sessionStartLimit: { total: 5, remaining: 1 } })
  const oldToken = e.token
  const first = await identified(e, [0, 2])
  const limit = async (token: string) => (await fetch(`${e.apiUrl}/v10/gateway/bot`, { headers: { authorization: `Bot ${token}` } })).json()
  t.match(await limit(oldToken), { session_start_limit: { total: 5, remaining: 0 } })
  const second = await RawGatewayClient.connect(e.url)
  second.identify({ token: oldToken, shard: [1, 2] })
  t.equal((await second.closed).code, 4004)
  t.equal((await first.client.closed).code, 4004, 'the live session is terminated too')
  t.match(e.breaches, [{ kind: 'session_start_limit', shardId: 1 }])
  t.match(e.sessions(), [{ state: 'ended', endReason: /token reset/ }])
  t.not(e.token, oldToken)
  t.equal((await fetch(`${e.apiUrl}/v10/gateway/bot`, { headers: { authorization: `Bot ${oldToken}` } })).status, 401)
  t.match(await limit(e.token), { session_start_limit: { remaining: 0 } })
})

t.test('RESUME after a 4200 close replays every missed event exactly once, with no gap, then RESUMED', async (t) => {
  const e = await emulator(t)
  const { client, sessionId } = await identified(e)
  e.produce(sessionId, 5)
  await client.next((p) => (p.d as { n?: number } | null)?.n === 5)
  const seq = client.lastSeq as number
  await client.close(4200)
  await reaches(t, e, sessionId, 'disconnected')
  t.equal(e.produce(sessionId, 4), 4, 'events keep coming while the session is resumable')
  const again = await RawGatewayClient.connect(e.resumeUrl)
  again.resume({ token: e.token, sessionId, seq })
  await again.dispatch('RESUMED')
  const replayed = again.received.filter((p) => p.op === 0 && p.t !== 'RESUMED').map((p) => p.s)
  t.same(replayed, [seq + 1, seq + 2, seq + 3, seq + 4])
  e.produce(sessionId, 2)
  await again.next((p) => (p.d as { n?: number } | null)?.n === 11)
  const report = e.checkDelivery(entries(e, 0, client, again))
  t.match(report, { expected: 11, delivered: 11, lost: [], duplicated: [], unknown: [] })
  t.match(e.resumes, [{ outcome: 'resumed', via: 'resume', sessionId, seq, replayed: 4, shardId: 0, tookOverConnectionId: null }])
  t.same(e.stats.resumes, { total: 1, byShard: { 0: 1 } })
  t.equal(e.stats.identifies.total, 1)
  // A RESUME from an older sequence replays again: the bot gets duplicates, and checkDelivery says so.
  await again.close(4200)
  await reaches(t, e, sessionId, 'disconnected')
  const stale = await RawGatewayClient.connect(e.url)
  stale.resume({ token: e.token, sessionId, seq })
  await stale.dispatch('RESUMED')
  t.equal(e.checkDelivery(entries(e, 0, client, again, stale)).duplicated.length, 6)
  t.equal(e.resumes[1]?.via, 'gateway')
})

t.test('a 1000 or 1001 close ends the session; a dropped socket keeps it until the resume window ends', async (t) => {
  const e = await emulator(t, { resumeWindowMs: 300, identifyWindowMs: 0 })
  for (const code of [1000, 1001]) {
    const { client, sessionId } = await identified(e)
    await client.close(code)
    await reaches(t, e, sessionId, 'ended')
    t.equal(e.session(sessionId)?.endReason, `client closed ${code}`)
    const retry = await RawGatewayClient.connect(e.resumeUrl)
    retry.resume({ token: e.token, sessionId, seq: 1 })
    t.same(await retry.next((p) => p.op === 9), { op: 9, d: false, s: null, t: null })
  }
  const dropped = await identified(e)
  await dropped.client.terminate()
  await reaches(t, e, dropped.sessionId, 'disconnected')
  await reaches(t, e, dropped.sessionId, 'expired')
  const late = await RawGatewayClient.connect(e.resumeUrl)
  late.resume({ token: e.token, sessionId: dropped.sessionId, seq: 1 })
  await late.next((p) => p.op === 9)
  const unknown = await RawGatewayClient.connect(e.resumeUrl)
  unknown.resume({ token: e.token, sessionId: 'nosuchsession', seq: 0 })
  await unknown.next((p) => p.op === 9)
  t.same(e.resumes.map((r) => r.reason), ['ended', 'ended', 'expired', 'unknown'])
  t.same(e.stats.refusedResumes.total, 4)
})

t.test('a RESUME past the last sequence closes 4007 and ends the session', async (t) => {
  const e = await emulator(t)
  const { client, sessionId } = await identified(e)
  await client.close(4200)
  await reaches(t, e, sessionId, 'disconnected')
  const bad = await RawGatewayClient.connect(e.resumeUrl)
  bad.resume({ token: e.token, sessionId, seq: 1000 })
  t.equal((await bad.closed).code, 4007)
  t.equal(e.session(sessionId)?.state, 'invalidated')
})

t.test('overlaps: two live sessions on one [shard, count]; two counts whose shards share guilds', async (t) => {
  const e = await emulator(t, { identifyWindowMs: 0, guildCount: 16 })
  const a = await identified(e, [0, 1])
  const b = await identified(e, [0, 1])
  t.match(e.breaches, [{ kind: 'overlap', shardId: 0, numShards: 1, sessionIds: [a.sessionId, b.sessionId] }])
  await a.client.close(1000)
  await b.client.close(1000)
  await reaches(t, e, a.sessionId, 'ended')
  await reaches(t, e, b.sessionId, 'ended')
  const half = await identified(e, [1, 2])
  await identified(e, [0, 4]) // 0 and 1 differ mod gcd(2, 4) = 2: no common guild
  t.equal(e.breaches.length, 1)
  const quarter = await identified(e, [3, 4]) // 3 ≡ 1 mod 2: guilds 3, 7, 11, 15 are on both
  t.match(e.breaches[1], {
    kind: 'guild_overlap',
    a: { sessionId: half.sessionId, shardId: 1, numShards: 2 },
    b: { sessionId: quarter.sessionId, shardId: 3, numShards: 4 },
    commonGuilds: 4,
  })
  const witness = BigInt((e.breaches[1] as { witnessGuildId: string }).witnessGuildId)
  t.equal(Number((witness >> 22n) % 2n), 1)
  t.equal(Number((witness >> 22n) % 4n), 3)
})

t.test('a RESUME of a session still live elsewhere takes it over (a zombie): the old connection closes, no overlap', async (t) => {
  const e = await emulator(t)
  const { client, sessionId } = await identified(e)
  const takeover = await RawGatewayClient.connect(e.resumeUrl)
  takeover.resume({ token: e.token, sessionId, seq: client.lastSeq })
  await takeover.dispatch('RESUMED')
  t.equal((await client.closed).code, 4000)
  t.same(e.breaches, [])
  t.equal(e.resumes[0]?.tookOverConnectionId, 1)
  t.equal(e.session(sessionId)?.connectionId, 2)
})

t.test('hooks: invalidateSession, sendReconnect, closeWith, dropConnection', async (t) => {
  const e = await emulator(t, { identifyWindowMs: 0 })
  const live = await identified(e, [0, 2])
  t.ok(e.invalidateSession(live.sessionId))
  t.same(await live.client.next((p) => p.op === 9), { op: 9, d: false, s: null, t: null })
  live.client.send({ op: 3, d: {} })
  t.equal((await live.client.closed).code, 4003, 'an invalidated connection is no longer authenticated')
  const r = await RawGatewayClient.connect(e.resumeUrl)
  r.resume({ token: e.token, sessionId: live.sessionId, seq: 1 })
  await r.next((p) => p.op === 9)
  t.equal(e.resumes.at(-1)?.reason, 'invalidated')

  const one = await identified(e, [1, 2])
  t.equal(e.sendReconnect(1, { closeAfterMs: 50 }), 1)
  t.same(await one.client.next((p) => p.op === 7), { op: 7, d: null, s: null, t: null })
  t.equal((await one.client.closed).code, 4000, 'closed by the server when the client does not reconnect')
  t.equal(e.session(one.sessionId)?.state, 'disconnected')

  const two = await identified(e, [1, 2])
  t.equal(e.closeWith(1, 4000, { numShards: 3 }), 0, 'the selector names no live connection')
  t.equal(e.closeWith(1, 4000), 1)
  t.equal((await two.client.closed).code, 4000)
  t.equal(e.session(two.sessionId)?.state, 'disconnected')

  const three = await identified(e, [1, 2])
  e.closeWith(1, 4004)
  t.equal((await three.client.closed).code, 4004)
  t.equal(e.session(three.sessionId)?.state, 'ended')

  const four = await identified(e, [1, 2])
  t.equal(e.dropConnection(1), 1)
  t.equal((await four.client.closed).code, 1006)
  t.equal(e.session(four.sessionId)?.state, 'disconnected')
})

t.test('the gateway send rate limit: past sendLimit.count in the window closes 4008', async (t) => {
  const e = await emulator(t, { sendLimit: { count: 5, windowMs: 60_000 } })
  const client = await RawGatewayClient.connect(e.url, { autoHeartbeat: false })
  for (let i = 0; i < 6; i++) client.heartbeat()
  t.equal((await client.closed).code, 4008)
  t.match(e.breaches, [{ kind: 'send_rate_limit', sent: 6 }])
})

t.test('checkDelivery: events of a session never resumed are lost; entries that match nothing are unknown', async (t) => {
  const e = await emulator(t)
  const { client, sessionId } = await identified(e)
  e.produce(sessionId, 3)
  await client.next((p) => (p.d as { n?: number } | null)?.n === 3)
  await client.close(4200)
  await reaches(t, e, sessionId, 'disconnected')
  e.produce(sessionId, 2)
  const report = e.checkDelivery([...entries(e, 0, client), { sessionId: 'other', n: 1 }, { shardId: 0, seq: 1 }])
  t.same(report.lost.map((l) => l.n), [4, 5])
  t.equal(report.unknown.length, 1)
  t.equal(report.ignored, 1, 'seq 1 is READY, not a test event')
  t.equal(e.sessions({ state: 'disconnected' }).length, 1)
})
