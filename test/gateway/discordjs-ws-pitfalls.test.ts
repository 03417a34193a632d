// Two ways a @discordjs/ws 2.0.4 caller breaks Discord's rules without noticing, caught by the
// emulator: a manager given `shardIds` but no `shardCount` identifies with num_shards = max(shardIds) + 1
// (not GET /gateway/bot's count), and an identify throttler that rejects (other than on abort) makes
// the shard IDENTIFY twice. A discord.js adapter must pass `shardCount` and throttle without throwing.
import t from 'tap'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
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
  // In a child process: a manager caught by this pitfall can hang in destroy() with its reconnect timers
  // running, which kept the test file's process alive to its 120 s time-out on a loaded machine.
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./rejecting-throttler-child.ts', import.meta.url))], {
    env: { ...process.env, PXE_EMULATOR_TOKEN: e.token, PXE_EMULATOR_API: e.apiUrl },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  t.teardown(async () => {
    child.kill('SIGKILL')
    await exited
    await e.stop()
  })
  await e.waitFor(() => e.breaches.some((b) => b.kind === 'protocol' && b.closeCode === 4005), { what: 'the second IDENTIFY' })
  await e.waitFor(() => e.sessions({ state: 'live' }).length === 1, { what: 'the shard to settle' })
  t.ok(e.stats.sessionsStarted.total >= 2, 'a session start was wasted')
})
