/**
 * A discord.js bot whose shards run under the Discord-PXE controller: copy this file, change onDispatch.
 *
 *   node dist/examples/discordjs-bot.js --bundle /etc/pxe/node --controller https://ctl-1:8443,https://ctl-2:8443 \
 *     --token-file /etc/pxe/bot-token --capacity 16 [--intents 513] [--state-file /var/lib/pxe-node/state.json]
 *
 * The controller decides which shards this machine runs; the agent claims every IDENTIFY from it, and
 * shards moved by plan RESUME on their new machine instead of identifying again. SIGTERM or SIGINT leaves
 * (agent.leave(), SPEC "Leaving on purpose"): every shard closes resumably, its session goes to the
 * controller with a last check-in, and the other machines RESUME them at once (a rolling reboot needs no
 * drain); a second signal stops at once (agent.stopNow()). Exit 0 either way.
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { REST } from '@discordjs/rest'
import { FileGenerationStore, MemoryGenerationStore, NodeAgent, loadBundle } from '../src/agent/index.js'
import { DiscordjsShards } from '../src/discordjs/index.js'

const USAGE = `usage: discordjs-bot --bundle DIR --controller URL[,URL...] --token-file FILE --capacity N [--intents N] [--state-file FILE] [--discord-api URL]

  --bundle DIR        the node's bundle from "pxe-pki issue" (key.pem, cert.pem, ca.pem, plan-jwks.json)
  --controller URLS   the controllers, comma-separated, tried in order (https://host:port)
  --token-file FILE   a file holding the bot token (one line; keep it 0600: the token is never a flag)
  --capacity N        shards this machine can run (1..128)
  --intents N         gateway intents as a number (default 513: GUILDS | GUILD_MESSAGES)
  --state-file FILE   where the agent keeps the last accepted plan generation across restarts
  --discord-api URL   Discord's REST API base (default https://discord.com/api; tests point it at an emulator)`

function fail(message: string): never {
  process.stderr.write(`discordjs-bot: ${message}\n${USAGE}\n`)
  process.exit(2)
}

const { values } = (() => {
  try {
    return parseArgs({
      options: {
        bundle: { type: 'string' },
        controller: { type: 'string' },
        'token-file': { type: 'string' },
        capacity: { type: 'string' },
        intents: { type: 'string', default: '513' },
        'state-file': { type: 'string' },
        'discord-api': { type: 'string' },
        help: { type: 'boolean' },
      },
      strict: true,
    })
  } catch (err) {
    return fail((err as Error).message)
  }
})()
if (values.help) {
  process.stdout.write(`${USAGE}\n`)
  process.exit(0)
}
if (!values.bundle || !values.controller || !values['token-file'] || !values.capacity) fail('--bundle, --controller, --token-file and --capacity are required')
const capacity = Number(values.capacity)
const intents = Number(values.intents)
if (!Number.isInteger(capacity) || capacity < 1 || capacity > 128) fail('--capacity must be an integer in 1..128')
if (!Number.isInteger(intents) || intents < 0) fail('--intents must be a non-negative integer')
let token: string
try {
  token = readFileSync(values['token-file'], 'utf8').trim()
} catch (err) {
  fail(`cannot read --token-file (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
}
if (token.length === 0) fail('--token-file is empty')

const identity = await loadBundle(values.bundle)
const messages = new Map<number, number>()
const shards = new DiscordjsShards({
  token,
  intents,
  wsOptions: { rest: new REST({ version: '10', ...(values['discord-api'] ? { api: values['discord-api'] } : {}) }).setToken(token) },
  onDispatch: (shardId, payload) => {
    // The bot's work goes here. This one counts messages per shard.
    if (payload.t === 'MESSAGE_CREATE') messages.set(shardId, (messages.get(shardId) ?? 0) + 1)
  },
})
const agent = new NodeAgent({
  identity,
  controllers: values.controller.split(','),
  capacity,
  generationStore: values['state-file'] ? new FileGenerationStore(values['state-file'], identity.nodeId) : new MemoryGenerationStore(),
  onStart: (ctx) => shards.onStart(ctx),
  onStop: (ctx) => shards.onStop(ctx),
  onEvent: (event) => process.stdout.write(`${JSON.stringify({ event: event.type, ...('shardId' in event ? { shard: event.shardId } : {}) })}\n`),
})
const report = setInterval(() => {
  const counts = Object.fromEntries([...messages].sort(([a], [b]) => a - b))
  process.stdout.write(`${JSON.stringify({ shards: shards.shardIds, messages: counts })}\n`)
}, 60_000).unref()

// The first signal leaves: the shards move at once and RESUME elsewhere, instead of waiting out the lease
// and identifying again. A second one stops at once, without waiting for slow stops or the controller.
let signals = 0
const onSignal = () => {
  signals += 1
  if (signals > 2) return
  clearInterval(report)
  void (signals === 1 ? agent.leave() : agent.stopNow()).then(() => process.exit(0))
}
process.on('SIGTERM', onSignal)
process.on('SIGINT', onSignal)
await agent.start()
