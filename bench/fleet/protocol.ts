/** Messages between the fleet orchestrator and its agent worker processes (IPC), and what they record. */
import type { AgentEvent } from '../../src/agent/agent-events.js'

/** Something one agent did, at `t` on the shared monotonic timeline (shared-clock.ts). */
export type FleetRecord =
  | { readonly t: number; readonly node: string; readonly kind: 'start'; readonly shard: number; readonly totalShards: number; readonly generation: number }
  | {
      readonly t: number
      readonly node: string
      readonly kind: 'stop'
      readonly shard: number
      readonly totalShards: number
      readonly reason: string
      /** When a slow stop callback was called (`t` is when it ended); absent for an instant stop. */
      readonly calledAt?: number
      /** The slow stop ended because the agent aborted it (its stop timeout passed). */
      readonly aborted?: boolean
    }
  | { readonly t: number; readonly node: string; readonly kind: 'event'; readonly event: AgentEvent }
  /** The discord.js adapter found its start grant too old for the IDENTIFY and claimed a fresh one (one grant unused). */
  | { readonly t: number; readonly node: string; readonly kind: 'stale_grant'; readonly shard: number }
  /** A gateway session of the shard is serving (--gateway discordjs): READY after an IDENTIFY, or RESUMED. */
  | { readonly t: number; readonly node: string; readonly kind: 'running'; readonly shard: number; readonly totalShards: number; readonly mode: 'identify' | 'resume' }

/** One test event an agent's gateway client delivered (--gateway discordjs): the emulator's session ID and `n`. */
export type Delivery = readonly [sessionId: string, n: number]

/** A gateway session a node ran (READY, or a handed-over session it RESUMEd): the emulator's session ID and the node. */
export type SessionOwner = readonly [sessionId: string, node: string]

/** Where the agents' discord.js clients connect (--gateway discordjs): the emulator in the orchestrator. */
export interface GatewayTarget {
  readonly url: string
  /** The `api` option of @discordjs/rest's REST (GET /gateway/bot). */
  readonly apiUrl: string
  readonly token: string
}

/** What the orchestrator tells a worker. */
export type ToWorker =
  | {
      readonly type: 'init'
      readonly controllers: readonly string[]
      readonly ca: string
      readonly jwks: unknown
      readonly identifyIntervalMs: number
      /** A stop callback takes this long (0: instant), or less when the agent aborts it. */
      readonly slowStopMs: number
      /** Put a partition proxy in front of every controller URL (the agents use the proxies). */
      readonly partitionable: boolean
      /** Run every shard with DiscordjsShards against this gateway; null: the callbacks only record. */
      readonly gateway: GatewayTarget | null
    }
  | { readonly type: 'start'; readonly name: string; readonly capacity: number; readonly bundleDir: string }
  | { readonly type: 'stop'; readonly name: string }
  | { readonly type: 'partition' }
  | { readonly type: 'heal' }
  | { readonly type: 'shutdown' }

/** What a worker tells the orchestrator. */
export type FromWorker =
  | { readonly type: 'ready' }
  | { readonly type: 'records'; readonly records: readonly FleetRecord[]; readonly deliveries?: readonly Delivery[]; readonly owners?: readonly SessionOwner[] }
  | { readonly type: 'started'; readonly name: string }
  | { readonly type: 'stopped'; readonly name: string }
  | { readonly type: 'failed'; readonly name: string; readonly message: string }
  | { readonly type: 'partitioned' }
  | { readonly type: 'healed' }
  | { readonly type: 'shutdown_done' }
