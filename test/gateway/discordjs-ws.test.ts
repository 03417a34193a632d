// discord.js's own gateway client (@discordjs/ws 2.0.4, in-process SimpleShardingStrategy) against the
// emulator: it connects through GET /gateway/bot, identifies, heartbeats, resumes a saved session in a
// new manager with every missed event exactly once, recovers from a zombie, RECONNECT, INVALID_SESSION
// and a dropped socket, and speaks zlib-stream. What it does is what a discord.js adapter inherits.
import t, { type Test } from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { REST } from '@discordjs/rest'
import { CompressionMethod, WebSocketManager, WebSocketShardEvents, type IIdentifyThrottler, type OptionalWebSocketManagerOptions, type SessionInfo } from '@discordjs/ws'
import { startGatewayEmulator, type GatewayEmulator } from '../support/gateway/gateway-emulator.js'
import type { GatewayEmulatorOptions } from '../support/gateway/emulator-options.js'
import type { ReceivedEvent } from '../support/gateway/delivery-check.js'

/**
 * One IDENTIFY per bucket per window, shared by every manager in a test (as a node-wide throttler, or
 * the controller's grants, would be): @discordjs/ws's default throttler lives per manager and would let
 * a second manager identify in a bucket the first one just used. Slots are reserved synchronously so
 * concurrent shards queue.
 */
class BucketThrottler implements IIdentifyThrottler {
  readonly calls: number[] = []
  private readonly next = new Map<number, number>()
  constructor(
    private readonly maxConcurrency: number,
    private readonly windowMs: number,
  ) {}

  async waitForIdentify(shardId: number, signal: AbortSignal): Promise<void> {
    this.calls.push(shardId)
    const bucket = shardId % this.maxConcurrency
    const slot = Math.max(Date.now(), this.next.get(bucket) ?? 0)
    this.next.set(bucket, slot + this.windowMs + 100) // 100 ms for the IDENTIFY's own way there
    if (slot > Date.now()) await sleep(slot - Date.now(), undefined, { signal })
  }
}

/** A bot: a manager, the sessions it keeps, and every dispatch it got. */
interface Bot {
  readonly manager: WebSocketManager
  readonly sessions: Map<number, SessionInfo>
  readonly errors: Error[]
}

/** `p`, or nothing after `ms` (a teardown must not hang a file on a client that never settles). */
async function bounded(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  await Promise.race([p, new Promise((resolve) => (timer = setTimeout(resolve, ms)))])
  clearTimeout(timer)
}

// Managers to destroy before their emulator stops: a manager whose gateway vanished would reconnect in a loop.
const managers = new WeakMap<GatewayEmulator, WebSocketManager[]>()

async function emulator(t: Test, options: GatewayEmulatorOptions): Promise<GatewayEmulator> {
  const e = await startGatewayEmulator(options)
  managers.set(e, [])
  t.teardown(async () => {
    await Promise.all((managers.get(e) ?? []).map((m) => bounded(Promise.resolve(m.destroy()), 5000)))
    await e.stop()
  })
  return e
}

/** Every dispatch the bots got, per shard, in order of arrival. */
class Inbox {
  readonly byShard = new Map<number, Array<{ s: number; t: string; d: unknown }>>()
  add(shardId: number, payload: { s: number; t: string; d: unknown }): void {
    const list = this.byShard.get(shardId) ?? []
    list.push({ s: payload.s, t: payload.t, d: payload.d })
    this.byShard.set(shardId, list)
  }
  entries(e: GatewayEmulator): ReceivedEvent[] {
    return [...this.byShard].flatMap(([shardId, list]) => list.map((p) => e.deliveryEntry(shardId, p)).filter((x) => x !== null))
  }
  testEvents(shardId: number, sessionId: string): number {
    return (this.byShard.get(shardId) ?? []).filter((p) => (p.d as { session?: string } | null)?.session === sessionId).length
  }
}

function bot(e: GatewayEmulator, inbox: Inbox, throttler: IIdentifyThrottler, sessions = new Map<number, SessionInfo>(), extra: Partial<OptionalWebSocketManagerOptions> = {}): Bot {
  const rest = new REST({ api: e.apiUrl }).setToken(e.token)
  const errors: Error[] = []
  const manager = new WebSocketManager({
    token: e.token,
    intents: 0,
    rest,
    buildIdentifyThrottler: () => throttler,
    retrieveSessionInfo: (shardId) => sessions.get(shardId) ?? null,
    updateSessionInfo: (shardId, info) => void (info ? sessions.set(shardId, info) : sessions.delete(shardId)),
    handshakeTimeout: 5000,
    helloTimeout: 5000,
    readyTimeout: 5000,
    ...extra,
  })
  manager.on(WebSocketShardEvents.Dispatch, (payload, shardId) => inbox.add(shardId, payload as { s: number; t: string; d: unknown }))
  manager.on(WebSocketShardEvents.Error, (error) => void errors.push(error))
  // GATEWAY_DEBUG=1 prints what @discordjs/ws says it is doing (why it resumes, identifies, waits).
  if (process.env.GATEWAY_DEBUG) manager.on(WebSocketShardEvents.Debug, (m, id) => console.error(`shard ${id}: ${m.replace(/\n\t/g, ' | ')}`))
  managers.get(e)?.push(manager)
  return { manager, sessions, errors }
}

/** The live session of each shard. */
function liveSession(e: GatewayEmulator, shardId: number): string {
  const [s] = e.sessions({ shardId, state: 'live' })
  if (!s) throw new Error(`no live session on shard ${shardId}`)
  return s.id
}

/** Waits until the bot holds every dispatch each live session produced (events paused first). */
async function caughtUp(e: GatewayEmulator, inbox: Inbox): Promise<void> {
  await e.waitFor(
    () => e.sessions({ state: 'live' }).every((s) => (inbox.byShard.get(s.shardId) ?? []).some((p) => p.s === s.seq)),
    { what: 'the bot to receive the last dispatch of every live session' },
  )
}

/** Whether the `s` of consecutive dispatches in `list` increase by exactly 1. */
function consecutive(list: ReadonlyArray<{ s: number }>): boolean {
  return list.every((p, i) => i === 0 || p.s === (list[i - 1] as { s: number }).s + 1)
}

t.test('connect, READY, events in sequence; destroy({code: 4200}) and a new manager RESUMEs with every missed event once; destroy() ends the sessions', async (t) => {
  const e = await emulator(t, { shardCount: 2, maxConcurrency: 2, eventsPerSecond: 20, heartbeatIntervalMs: 500 })
  const inbox = new Inbox()
  const throttler = new BucketThrottler(2, e.options.identifyWindowMs)
  const first = bot(e, inbox, throttler)
  await first.manager.connect()
  t.same(e.identifies.map((i) => [i.shardId, i.numShards, i.outcome]).sort(), [[0, 2, 'ready'], [1, 2, 'ready']], 'shardCount from GET /gateway/bot')
  const [id0, id1] = [liveSession(e, 0), liveSession(e, 1)]
  t.match(first.sessions.get(0), { sessionId: id0, shardId: 0, shardCount: 2, resumeURL: e.resumeUrl })
  await e.waitFor(() => inbox.testEvents(0, id0) >= 10 && inbox.testEvents(1, id1) >= 10, { what: '10 events on each shard' })
  for (const shardId of [0, 1]) {
    const list = inbox.byShard.get(shardId) ?? []
    t.equal(list[0]?.t, 'READY')
    t.equal(list[0]?.s, 1)
    t.ok(consecutive(list), `shard ${shardId}: s increases by 1`)
  }

  // destroy() without `recover` clears the manager's session info (updateSessionInfo(shardId, null))
  // before it closes, whatever the code: a session to carry over must be read first.
  const carried = new Map([...first.sessions].map(([shardId, info]) => [shardId, { ...info }]))
  await first.manager.destroy({ code: 4200 })
  t.equal(first.sessions.size, 0, 'destroy cleared the session store')
  await e.waitFor(() => e.sessions({ state: 'disconnected' }).length === 2, { what: 'both sessions resumable' })
  for (const [shardId, info] of carried) {
    // What the bot actually got is the sequence to resume from.
    info.sequence = Math.max(...(inbox.byShard.get(shardId) ?? []).map((p) => p.s))
    t.ok(info.sequence >= 11)
  }
  // The second manager's updateSessionInfo will replace these entries: keep the numbers apart.
  const resumedFrom = new Map([...carried].map(([shardId, info]) => [shardId, info.sequence]))
  await e.waitFor(() => [0, 1].every((shardId) => (e.sessions({ shardId })[0]?.seq ?? 0) >= (resumedFrom.get(shardId) ?? 0) + 5), {
    what: '5 events produced while disconnected',
  })
  const before = new Map([0, 1].map((shardId) => [shardId, (inbox.byShard.get(shardId) ?? []).length]))

  const second = bot(e, inbox, throttler, carried)
  await second.manager.connect()
  t.same(e.resumes.map((r) => [r.sessionId, r.seq, r.outcome, r.via]).sort(), [[id0, resumedFrom.get(0), 'resumed', 'resume'], [id1, resumedFrom.get(1), 'resumed', 'resume']].sort())
  t.ok(e.resumes.every((r) => r.replayed >= 5))
  t.equal(e.stats.identifies.total, 2, 'no IDENTIFY for a resumed session')
  t.same(throttler.calls.sort(), [0, 1], 'the throttler is asked only before an IDENTIFY')
  await sleep(200)
  e.pauseEvents()
  await caughtUp(e, inbox)
  for (const shardId of [0, 1]) {
    const after = (inbox.byShard.get(shardId) ?? []).slice(before.get(shardId))
    t.equal(after[0]?.s, (resumedFrom.get(shardId) ?? 0) + 1, `shard ${shardId}: the replay starts right after the carried sequence`)
    t.ok(consecutive(after), `shard ${shardId}: replay, RESUMED and live events in sequence`)
    t.ok(after.some((p) => p.t === 'RESUMED'))
  }
  const report = e.checkDelivery(inbox.entries(e))
  t.match(report, { lost: [], duplicated: [], unknown: [] })
  t.ok(report.expected >= 30, 'at least 10 + 5 events on each shard')

  await second.manager.destroy()
  await e.waitFor(() => e.sessions({ state: 'ended' }).length === 2, { what: 'destroy() (1000) to end both sessions' })
  t.match(e.sessions(), [{ endReason: 'client closed 1000' }, { endReason: 'client closed 1000' }])
  t.same(e.breaches, [])
  t.same([...first.errors, ...second.errors], [])
})

t.test('zombie (no ACK), RECONNECT, a dropped socket and INVALID_SESSION: what @discordjs/ws does, and nothing lost twice', async (t) => {
  const e = await emulator(t, { shardCount: 2, maxConcurrency: 2, eventsPerSecond: 10, heartbeatIntervalMs: 300, identifyWindowMs: 1500 })
  const inbox = new Inbox()
  const throttler = new BucketThrottler(2, e.options.identifyWindowMs)
  const b = bot(e, inbox, throttler)
  await b.manager.connect()
  const sessionOf = (shardId: number) => liveSession(e, shardId)
  const original = [sessionOf(0), sessionOf(1)]

  e.withholdAcks(0)
  await e.waitFor(() => e.resumes.some((r) => r.shardId === 0 && r.outcome === 'resumed'), { what: 'shard 0 to resume after a missed ACK' })
  t.equal(sessionOf(0), original[0], 'a zombie connection is closed resumably and the session resumed')

  t.equal(e.sendReconnect(1, { closeAfterMs: null }), 1)
  await e.waitFor(() => e.resumes.some((r) => r.shardId === 1 && r.outcome === 'resumed'), { what: 'shard 1 to resume after RECONNECT' })
  t.equal(sessionOf(1), original[1])

  t.equal(e.dropConnection(0), 1)
  await e.waitFor(() => e.resumes.filter((r) => r.shardId === 0 && r.outcome === 'resumed').length === 2, { what: 'shard 0 to resume after a dropped socket' })
  t.equal(sessionOf(0), original[0], 'a socket closed without a close frame (1006) is resumed')

  t.ok(e.invalidateSession(original[1] as string))
  await e.waitFor(() => e.sessions({ shardId: 1, state: 'live' }).length === 1 && b.sessions.get(1)?.sessionId === sessionOf(1), {
    what: 'shard 1 to identify a new session after INVALID_SESSION d:false',
    timeoutMs: 15_000,
  })
  t.same(e.identifies.filter((i) => i.shardId === 1).map((i) => i.outcome), ['ready', 'ready'])
  t.not(sessionOf(1), original[1], 'the manager keeps the new session')

  e.pauseEvents()
  await caughtUp(e, inbox)
  t.match(e.checkDelivery(inbox.entries(e)), { lost: [], duplicated: [], unknown: [] })
  t.same(e.breaches, [], 'no bucket breach: the re-identify waited for its bucket')
  t.same(b.errors, [])
})

t.test('compression: zlib-stream (CompressionMethod.ZlibNative) end to end', async (t) => {
  const e = await emulator(t, { eventsPerSecond: 50 })
  const inbox = new Inbox()
  const b = bot(e, inbox, new BucketThrottler(1, 5000), new Map(), { compression: CompressionMethod.ZlibNative })
  await b.manager.connect()
  const id = liveSession(e, 0)
  await e.waitFor(() => inbox.testEvents(0, id) >= 20, { what: '20 compressed events' })
  t.match(e.connections(), [{ compressed: true, authenticated: true }])
  t.ok(consecutive(inbox.byShard.get(0) ?? []))
  await b.manager.destroy()
  t.same(e.breaches, [])
})

t.test('a wrong token: GET /gateway/bot is refused, a wrong gateway token closes 4004; connect() rejects either way', async (t) => {
  const e = await emulator(t, {})
  const status401 = { name: /^DiscordAPIError/, status: 401 }
  await t.rejects(new REST({ api: e.apiUrl }).setToken('wrong').get('/gateway/bot'), status401)
  // (@discordjs/rest drops its token after a 401: each attempt needs a REST of its own.)
  const refused = new WebSocketManager({ token: 'wrong', intents: 0, rest: new REST({ api: e.apiUrl }).setToken('wrong') })
  await t.rejects(refused.connect(), status401)

  const inbox = new Inbox()
  const b = bot(e, inbox, new BucketThrottler(1, 5000), new Map(), { token: 'wrong' })
  // The shard's error event also rejects the once(Ready) that connect() waits on.
  await t.rejects(b.manager.connect(), { message: 'Authentication failed' })
  t.match(b.errors, [{ message: 'Authentication failed' }])
  t.match(e.breaches, [{ kind: 'protocol', closeCode: 4004 }])
  await sleep(1000) // @discordjs/ws reconnects 500 ms after a recoverable close; 4004 is not one
  t.equal(e.stats.identifies.total, 1, 'no second IDENTIFY after 4004')
  t.equal(e.sessions().length, 0)
})
