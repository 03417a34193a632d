/**
 * A fleet worker process: runs real NodeAgents (src/agent), each made from the PEM of its own bundle,
 * whose shard callbacks record every start and stop on the shared monotonic timeline. Records go to
 * the orchestrator over IPC every 100 ms. Started by worker-pool.ts with fork(); not a public entry.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { AgentEvent } from '../../src/agent/agent-events.js'
import { identityFromPem } from '../../src/agent/identity.js'
import { NodeAgent } from '../../src/agent/node-agent.js'
import { PinnedKeys } from '../../src/agent/pinned-keys.js'
import type { FleetRecord, FromWorker, ToWorker } from './protocol.js'
import { sharedNow } from './shared-clock.js'

type Init = Extract<ToWorker, { type: 'init' }>

const FLUSH_MS = 100
const agents = new Map<string, NodeAgent>()
let pending: FleetRecord[] = []
let init: Init | null = null
let pinned: PinnedKeys | null = null

function send(message: FromWorker): void {
  process.send?.(message)
}

function flush(): void {
  if (pending.length === 0) return
  send({ type: 'records', records: pending })
  pending = []
}

/** The agent's own shard_started/shard_stopped repeat the callbacks; the callbacks are the record. */
function worthRecording(event: AgentEvent): boolean {
  return event.type !== 'shard_started' && event.type !== 'shard_stopped'
}

async function startAgent(name: string, capacity: number, bundleDir: string): Promise<void> {
  const { controllers, ca, identifyIntervalMs } = init!
  const [cert, key] = await Promise.all([readFile(join(bundleDir, 'cert.pem'), 'utf8'), readFile(join(bundleDir, 'key.pem'), 'utf8')])
  const identity = await identityFromPem({ cert, key, ca, jwks: pinned! })
  const agent = new NodeAgent({
    identity,
    controllers,
    capacity,
    identifyIntervalMs,
    // The simulated shard runs the moment the callback is called, and stops the moment its stop is.
    onStart: (ctx) => void pending.push({ t: sharedNow(), node: name, kind: 'start', shard: ctx.shardId, generation: ctx.generation }),
    onStop: (ctx) => void pending.push({ t: sharedNow(), node: name, kind: 'stop', shard: ctx.shardId, reason: ctx.reason }),
    onEvent: (event) => {
      if (worthRecording(event)) pending.push({ t: sharedNow(), node: name, kind: 'event', event })
    },
  })
  agents.set(name, agent)
  await agent.start()
}

async function onMessage(message: ToWorker): Promise<void> {
  switch (message.type) {
    case 'init':
      init = message
      pinned = await PinnedKeys.fromJwks(message.jwks, 'plan-jwks.json')
      send({ type: 'ready' })
      return
    case 'start':
      try {
        await startAgent(message.name, message.capacity, message.bundleDir)
        send({ type: 'started', name: message.name })
      } catch (err) {
        send({ type: 'failed', name: message.name, message: (err as Error).message })
      }
      return
    case 'stop':
      await agents.get(message.name)?.stop()
      flush()
      send({ type: 'stopped', name: message.name })
      return
    case 'shutdown':
      await Promise.all([...agents.values()].map((agent) => agent.stop()))
      flush()
      send({ type: 'shutdown_done' })
      process.disconnect()
      return
  }
}

setInterval(flush, FLUSH_MS)
process.on('message', (message: ToWorker) => void onMessage(message))
// The orchestrator is gone (crashed or killed): nothing may keep running shards.
process.on('disconnect', () => process.exit(0))
