// Child of discordjs-ws-pitfalls.test.ts: one @discordjs/ws shard whose identify throttler rejects its
// first call, against the emulator named in the environment. It runs until the test kills it: once
// caught by this pitfall, the manager's destroy() can hang and its reconnect timers keep a process alive.
import { REST } from '@discordjs/rest'
import { WebSocketManager, WebSocketShardEvents } from '@discordjs/ws'

const token = process.env.PXE_EMULATOR_TOKEN!
let calls = 0
const manager = new WebSocketManager({
  token,
  intents: 0,
  rest: new REST({ api: process.env.PXE_EMULATOR_API! }).setToken(token),
  shardIds: [0],
  buildIdentifyThrottler: () => ({
    waitForIdentify: async () => {
      if (calls++ === 0) throw new Error('not now')
    },
  }),
})
manager.on(WebSocketShardEvents.Error, () => undefined)
void manager.connect().catch(() => undefined)
