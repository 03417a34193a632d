/** Messages between the fleet orchestrator and its agent worker processes (IPC), and what they record. */
import type { AgentEvent } from '../../src/agent/agent-events.js'

/** Something one agent did, at `t` on the shared monotonic timeline (shared-clock.ts). */
export type FleetRecord =
  | { readonly t: number; readonly node: string; readonly kind: 'start'; readonly shard: number; readonly generation: number }
  | { readonly t: number; readonly node: string; readonly kind: 'stop'; readonly shard: number; readonly reason: string }
  | { readonly t: number; readonly node: string; readonly kind: 'event'; readonly event: AgentEvent }

/** What the orchestrator tells a worker. */
export type ToWorker =
  | { readonly type: 'init'; readonly controllers: readonly string[]; readonly ca: string; readonly jwks: unknown; readonly identifyIntervalMs: number }
  | { readonly type: 'start'; readonly name: string; readonly capacity: number; readonly bundleDir: string }
  | { readonly type: 'stop'; readonly name: string }
  | { readonly type: 'shutdown' }

/** What a worker tells the orchestrator. */
export type FromWorker =
  | { readonly type: 'ready' }
  | { readonly type: 'records'; readonly records: readonly FleetRecord[] }
  | { readonly type: 'started'; readonly name: string }
  | { readonly type: 'stopped'; readonly name: string }
  | { readonly type: 'failed'; readonly name: string; readonly message: string }
  | { readonly type: 'shutdown_done' }
