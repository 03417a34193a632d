/**
 * A fleet worker process: runs real NodeAgents (src/agent), each made from the PEM of its own bundle,
 * whose shard callbacks record every start and stop on the shared monotonic timeline. Records go to
 * the orchestrator over IPC every 100 ms. Started by worker-pool.ts with fork(); not a public entry.
 *
 * A worker may hold partition proxies (partition-proxy.ts) in front of the controller (each HA replica) for its agents,
 * and give them slow stop callbacks: a stop then takes `slowStopMs`, or ends when the agent aborts it
 * (its stop timeout), and is recorded when it really ends — the shard ran until then.
 *
 * With --gateway discordjs (`init.gateway`) the shards run in the discord.js adapter against the gateway
 * emulator (gateway-shards.ts), and the test events they deliver go to the orchestrator with the records.
 *
 * SIGTERM makes every agent leave, as pxe-node does (the rolling reboot sends it); SIGKILL is a crash.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { AgentEvent } from '../../src/agent/agent-events.js'
import { identityFromPem } from '../../src/agent/identity.js'
import { NodeAgent } from '../../src/agent/node-agent.js'
import { PinnedKeys } from '../../src/agent/pinned-keys.js'
import type { ShardStopContext } from '../../src/agent/shard-runner.js'
import { gatewayShardCallbacks } from './gateway-shards.js'
import { PartitionProxy } from './partition-proxy.js'
import type { Delivery, FleetRecord, FromWorker, SessionOwner, ToWorker } from './protocol.js'
import { sharedNow } from './shared-clock.js'

type Init = Extract<ToWorker, { type: 'init' }>

const FLUSH_MS = 100
const agents = new Map<string, NodeAgent>()
let pending: FleetRecord[] = []
let deliveries: Delivery[] = []
let owners: SessionOwner[] = []
let init: Init | null = null
let pinned: PinnedKeys | null = null
// one per controller URL: a partition must cut every replica off, or the agent just fails over to another
let proxies: PartitionProxy[] = []
let controllers: readonly string[] = []

function send(message: FromWorker): void {
  process.send?.(message)
}

function flush(): void {
  if (pending.length === 0 && deliveries.length === 0 && owners.length === 0) return
  send({ type: 'records', records: pending, ...(deliveries.length === 0 ? {} : { deliveries }), ...(owners.length === 0 ? {} : { owners }) })
  pending = []
  deliveries = []
  owners = []
}

/** The agent's own shard_started/shard_stopped repeat the callbacks; the callbacks are the record. */
function worthRecording(event: AgentEvent): boolean {
  return event.type !== 'shard_started' && event.type !== 'shard_stopped'
}

/** Resolves after `ms`, or at once when `signal` aborts; true when it was aborted. */
function sleepOrAbort(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(true)
  return new Promise((resolve) => {
    const done = (aborted: boolean) => {
      clearTimeout(timer)
      signal.removeEventListener('abort', onAbort)
      resolve(aborted)
    }
    const onAbort = () => done(true)
    const timer = setTimeout(() => done(false), ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/** A slow stop: the session ends after `slowStopMs` or at the agent's abort, and is recorded then. */
async function slowStop(name: string, ctx: ShardStopContext, running: Set<string>): Promise<void> {
  // A stop the agent calls again after an aborted one finds nothing running: it has nothing to wait for.
  if (!running.has(`${ctx.totalShards}/${ctx.shardId}`)) return
  const calledAt = sharedNow()
  // ctx.signal aborts at the agent's stop timeout: the simulated gateway client then drops its session at once.
  const aborted = await sleepOrAbort(init!.slowStopMs, ctx.signal)
  running.delete(`${ctx.totalShards}/${ctx.shardId}`)
  pending.push({ t: sharedNow(), node: name, kind: 'stop', shard: ctx.shardId, totalShards: ctx.totalShards, reason: ctx.reason, calledAt, aborted })
}

/** The recording callbacks (no gateway client): a shard runs the moment its start is called, and (unless slow) stops the moment its stop is. */
function recordingCallbacks(name: string): Pick<ConstructorParameters<typeof NodeAgent>[0], 'onStart' | 'onStop'> {
  const running = new Set<string>() // count/shard, as this node's sessions stand (a live reshard runs one number under two counts)
  return {
    onStart: (ctx) => {
      running.add(`${ctx.totalShards}/${ctx.shardId}`)
      pending.push({ t: sharedNow(), node: name, kind: 'start', shard: ctx.shardId, totalShards: ctx.totalShards, generation: ctx.generation })
    },
    onStop: (ctx) => {
      if (init!.slowStopMs > 0) return slowStop(name, ctx, running)
      running.delete(`${ctx.totalShards}/${ctx.shardId}`)
      pending.push({ t: sharedNow(), node: name, kind: 'stop', shard: ctx.shardId, totalShards: ctx.totalShards, reason: ctx.reason })
    },
  }
}

/** The agent's shard callbacks: recording only, or the discord.js adapter against the emulator. */
function shardCallbacks(name: string): Pick<ConstructorParameters<typeof NodeAgent>[0], 'onStart' | 'onStop'> {
  const { gateway, slowStopMs, identifyIntervalMs } = init!
  if (gateway === null) return recordingCallbacks(name)
  // The arrays are swapped on every flush: push to the current ones.
  const callbacks = gatewayShardCallbacks({ node: name, gateway, slowStopMs, sleepOrAbort, identifyIntervalMs, record: (r) => pending.push(r), deliver: (d) => deliveries.push(d), own: (o) => owners.push(o) })
  return { onStart: (ctx) => callbacks.onStart(ctx), onStop: (ctx) => callbacks.onStop(ctx) }
}

async function startAgent(name: string, capacity: number, bundleDir: string): Promise<void> {
  const { ca, identifyIntervalMs } = init!
  const [cert, key] = await Promise.all([readFile(join(bundleDir, 'cert.pem'), 'utf8'), readFile(join(bundleDir, 'key.pem'), 'utf8')])
  const identity = await identityFromPem({ cert, key, ca, jwks: pinned! })
  const agent = new NodeAgent({
    identity,
    controllers,
    capacity,
    identifyIntervalMs,
    ...shardCallbacks(name),
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
      controllers = message.controllers
      if (message.partitionable) {
        proxies = message.controllers.map((url) => new PartitionProxy(new URL(url).hostname, Number(new URL(url).port)))
        controllers = await Promise.all(proxies.map(async (proxy) => `https://127.0.0.1:${await proxy.listen()}`))
      }
      send({ type: 'ready' })
      return
    case 'partition':
      for (const proxy of proxies) proxy.partition()
      send({ type: 'partitioned' })
      return
    case 'heal':
      for (const proxy of proxies) proxy.heal()
      send({ type: 'healed' })
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
      for (const proxy of proxies) proxy.close()
      flush()
      send({ type: 'shutdown_done' })
      process.disconnect()
      return
  }
}

/**
 * SIGTERM, as pxe-node takes it (a rolling reboot's planned stop): every agent leaves (agent.leave():
 * its shards stop resumably and their sessions go with the leaving check-in), the records go out, and
 * the process exits 0. A second SIGTERM stops at once (agent.stopNow()).
 */
let terminating = false
process.on('SIGTERM', () => {
  if (terminating) {
    for (const agent of agents.values()) void agent.stopNow()
    return
  }
  terminating = true
  void Promise.all([...agents.values()].map((agent) => agent.leave())).then(() => {
    for (const proxy of proxies) proxy.close()
    flush()
    // the records first (IPC keeps the order), then the exit through 'disconnect'
    process.send?.({ type: 'shutdown_done' } satisfies FromWorker, () => process.disconnect())
  })
})

setInterval(flush, FLUSH_MS)
process.on('message', (message: ToWorker) => void onMessage(message))
// The orchestrator is gone (crashed or killed): nothing may keep running shards.
process.on('disconnect', () => process.exit(0))
