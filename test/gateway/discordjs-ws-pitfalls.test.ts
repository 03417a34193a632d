// Two ways a @discordjs/ws 2.0.4 caller breaks Discord's rules without noticing, caught by the
// emulator: a manager given `shardIds` but no `shardCount` identifies with num_shards = max(shardIds) + 1
// (not GET /gateway/bot's count), and an identify throttler that rejects (other than on abort) makes
// the shard IDENTIFY twice. A discord.js adapter must pass `shardCount` and throttle without throwing.
import t from 'tap'
import { REST } from '@discordjs/rest'
import { WebSocketManager, WebSocketShardEvents, type IIdentifyThrottler } from '@discordjs/ws'
import { startGatewayEmulator } from '../support/gateway/gateway-emulator.js'

function manager(e: Awaited<ReturnType<typeof startGatewayEmulator>>, shardIds: number[], throttler: IIdentifyThrottler): WebSocketManager {
  const m = new WebSocketManager({
    token: e.token,
    intents: 0,
    rest: new REST({ api: e.apiUrl }).setToken(e.token),
    shardIds,
    buildIdentifyThrottler: () => throttler,
  })
  m.on(WebSocketShardEvents.Error, () => undefined)
  return m
}

t.test('shardIds without shardCount: num_shards is max(shardIds) + 1, and here that is "sharding required"', async (t) => {
  const e = await startGatewayEmulator({ shardCount: 4, guildCount: 3000, eventsPerSecond: 0 })
  const m = manager(e, [0], { waitForIdentify: async () => undefined })
  t.teardown(async () => {
    await m.destroy()
    await e.stop()
  })
  await t.rejects(m.connect(), { message: 'Sharding is required' })
  t.match(e.identifies, [{ shardId: 0, numShards: 1, outcome: 'closed', closeCode: 4011 }], 'GET /gateway/bot said 4 shards')
})

t.test('an identify throttler that rejects: the shard reconnects and identifies, then IDENTIFYs again on that connection (4005)', async (t) => {
  const e = await startGatewayEmulator({ identifyWindowMs: 200, eventsPerSecond: 0 })
  let calls = 0
  const m = manager(e, [0], {
    waitForIdentify: async () => {
      if (calls++ === 0) throw new Error('not now')
    },
  })
  t.teardown(async () => {
    // @discordjs/ws's destroy() can wait forever for a shard caught mid-reconnect by this very pitfall (a
    // full CI run hung here for the whole file's 120 s): bounded, then the emulator cuts every socket.
    await Promise.race([m.destroy(), new Promise((resolve) => setTimeout(resolve, 3000).unref())])
    await e.stop()
  })
  void m.connect().catch(() => undefined)
  await e.waitFor(() => e.breaches.some((b) => b.kind === 'protocol' && b.closeCode === 4005), { what: 'the second IDENTIFY' })
  await e.waitFor(() => e.sessions({ state: 'live' }).length === 1, { what: 'the shard to settle' })
  t.ok(e.stats.sessionsStarted.total >= 2, 'a session start was wasted')
})
