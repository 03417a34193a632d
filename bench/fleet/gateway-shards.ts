/**
 * An agent's shard callbacks with --gateway discordjs: every shard runs in DiscordjsShards (src/discordjs)
 * against the gateway emulator, and the callbacks around it keep the records the simulator's checks read:
 * a start the moment onStart is called (the session may exist from then on), a stop when the adapter's
 * stop has closed the socket (the session ran until then), and every test event delivered.
 */
import { REST } from '@discordjs/rest'
import type { ShardContext, ShardStopContext, StopResult } from '../../src/agent/shard-runner.js'
import { DiscordjsShards } from '../../src/discordjs/index.js'
import { STALE_START_GRANT } from '../../src/discordjs/shard-connection.js'
import { deliveryEntry } from '../../test/support/gateway/delivery-check.js'
import type { Delivery, FleetRecord, GatewayTarget, SessionOwner } from './protocol.js'
import { sharedNow } from './shared-clock.js'

/** The emulator's default dispatch name for its numbered test events. */
const TEST_EVENT = 'PXE_TEST_EVENT'

/** What the callbacks record into, and how slow a stop is. */
export interface GatewayShardsDeps {
  readonly node: string
  readonly gateway: GatewayTarget
  readonly record: (record: FleetRecord) => void
  readonly deliver: (delivery: Delivery) => void
  /** A session this node runs (so that the orchestrator can tell whose sessions the emulator found overlapping). */
  readonly own: (owner: SessionOwner) => void
  /** A stop waits this long (or until the agent aborts it) before the adapter closes the session (0: at once). */
  readonly slowStopMs: number
  readonly sleepOrAbort: (ms: number, signal: AbortSignal) => Promise<boolean>
  /** The controller's identify_interval_ms (the adapter's maxGrantAgeMs is taken from it). */
  readonly identifyIntervalMs: number
}

/** NodeAgent's onStart / onStop for one agent, running DiscordjsShards. */
export function gatewayShardCallbacks(deps: GatewayShardsDeps): { onStart(ctx: ShardContext): Promise<void>; onStop(ctx: ShardStopContext): Promise<StopResult> } {
  const { node, gateway, record } = deps
  const shards = new DiscordjsShards({
    token: gateway.token,
    intents: 0,
    wsOptions: { rest: new REST({ api: gateway.apiUrl }).setToken(gateway.token) },
    // Half of the slack above Discord's 5 s, not all of it: the other half is for what lies between an
    // IDENTIFY leaving the agent and the emulator reading it (the socket, a busy event loop on either side).
    maxGrantAgeMs: Math.floor((deps.identifyIntervalMs - 5000) / 2),
    // Counted so that the run can tell grants spent on an IDENTIFY from those a slow start let age.
    onDebug: (shardId, message) => {
      if (message === STALE_START_GRANT) record({ t: sharedNow(), node, kind: 'stale_grant', shard: shardId })
    },
    onDispatch: (shardId, payload) => {
      const ready = payload.t === 'READY' ? (payload.d as { session_id?: unknown } | null)?.session_id : undefined
      if (typeof ready === 'string') deps.own([ready, node])
      // When the shard serves again: the end of a move's downtime (the rolling-reboot figures read it).
      if (payload.t === 'READY' || payload.t === 'RESUMED') {
        record({ t: sharedNow(), node, kind: 'running', shard: shardId, totalShards: counts.get(shardId) ?? 0, mode: payload.t === 'READY' ? 'identify' : 'resume' })
      }
      const entry = deliveryEntry(shardId, payload, TEST_EVENT)
      if (entry?.sessionId !== undefined && entry.n !== undefined) deps.deliver([entry.sessionId, entry.n])
    },
  })
  const running = new Set<string>() // count/shard, as this node's sessions stand (a live reshard runs one number under two counts)
  const counts = new Map<number, number>() // shard → the count of its latest start (for the 'running' record)
  const stopped = (shardId: number, totalShards: number, reason: string, calledAt: number, aborted?: boolean) => {
    running.delete(`${totalShards}/${shardId}`)
    record({ t: sharedNow(), node, kind: 'stop', shard: shardId, totalShards, reason, calledAt, ...(aborted ? { aborted } : {}) })
  }
  return {
    async onStart(ctx) {
      // A refused RESUME makes the agent call onStart again (as an IDENTIFY): one session, one start record.
      if (!running.has(`${ctx.totalShards}/${ctx.shardId}`)) {
        running.add(`${ctx.totalShards}/${ctx.shardId}`)
        record({ t: sharedNow(), node, kind: 'start', shard: ctx.shardId, totalShards: ctx.totalShards, generation: ctx.generation })
      }
      counts.set(ctx.shardId, ctx.totalShards)
      if (ctx.resume !== null) deps.own([ctx.resume.sessionId, node])
      const calledAt = sharedNow()
      try {
        await shards.onStart(ctx)
      } catch (err) {
        // The adapter closed what it opened: nothing of the shard runs (a retry records a new start).
        stopped(ctx.shardId, ctx.totalShards, 'start_failed', calledAt)
        throw err
      }
    },
    async onStop(ctx) {
      // A stop the agent calls again after an aborted one, or after a failed start, finds nothing running.
      if (!running.has(`${ctx.totalShards}/${ctx.shardId}`)) return undefined
      const calledAt = sharedNow()
      // A slow stop (a partitioned node's): the session goes on delivering until the wait ends or the agent aborts.
      const aborted = deps.slowStopMs > 0 ? await deps.sleepOrAbort(deps.slowStopMs, ctx.signal) : false
      const session = await shards.onStop(ctx)
      stopped(ctx.shardId, ctx.totalShards, ctx.reason, calledAt, aborted)
      return session
    },
  }
}
