/** Test helpers for the HA tests: an in-process replica that records its leadership events, and polling. */
import { performance } from 'node:perf_hooks'
import type { Test } from 'tap'
import { Leadership, type Fence, type StepDownReason } from '../../src/ha/leader-election.js'
import { ThreadLeaseKeeper, type LeaseKeeper } from '../../src/ha/lease-keeper.js'
import type { EtcdClient } from '../../src/ha/etcd-api.js'
import type { EtcdCluster } from '../support/etcd-cluster.js'

/** One recorded leadership event, with the monotonic time it happened. */
export type ReplicaEvent =
  | { readonly at: number; readonly type: 'started'; readonly fence: Fence }
  | { readonly at: number; readonly type: 'stopped'; readonly reason: StepDownReason }
  | { readonly at: number; readonly type: 'leader'; readonly id: string | null }

/** A Leadership on its own client, with every event recorded. */
export interface Replica {
  readonly id: string
  readonly client: EtcdClient
  readonly leadership: Leadership
  /** The lease keeper thread, when started with `keeper: true`. */
  readonly keeper: LeaseKeeper | undefined
  readonly events: ReplicaEvent[]
  readonly errors: Error[]
  /** The events of one type, in order. */
  of<T extends ReplicaEvent['type']>(type: T): Extract<ReplicaEvent, { type: T }>[]
}

/** Starts a replica campaigning under `prefix`; it is closed (lease revoked) at the test's teardown. */
export async function startReplica(t: Test, cluster: EtcdCluster, opts: { id: string; prefix: string; ttl: number; keeper?: boolean | LeaseKeeper }): Promise<Replica> {
  const client = await cluster.client(t)
  // as the controller does: the lease renewed on a thread of its own (lease-keeper.ts)
  const keeper = opts.keeper === true ? new ThreadLeaseKeeper(cluster.connection) : opts.keeper || undefined
  const events: ReplicaEvent[] = []
  const errors: Error[] = []
  const at = () => performance.now()
  const leadership = new Leadership({
    client,
    prefix: opts.prefix,
    controllerId: opts.id,
    leaseTtlSeconds: opts.ttl,
    ...(keeper ? { keeper } : {}),
    events: {
      onStartedLeading: (fence) => events.push({ at: at(), type: 'started', fence }),
      onStoppedLeading: (reason) => events.push({ at: at(), type: 'stopped', reason }),
      onNewLeader: (id) => events.push({ at: at(), type: 'leader', id }),
      onError: (err) => errors.push(err),
    },
  })
  leadership.start()
  t.teardown(async () => {
    await leadership.close()
    await keeper?.close()
  })
  const of = <T extends ReplicaEvent['type']>(type: T) => events.filter((e): e is Extract<ReplicaEvent, { type: T }> => e.type === type)
  return { id: opts.id, client, leadership, keeper, events, errors, of }
}

/** Polls `condition` every 20 ms; throws naming `what` when it does not hold within `timeoutMs`. */
export async function until(condition: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const end = performance.now() + timeoutMs
  while (!(await condition())) {
    if (performance.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** The replicas that lead right now. */
export const leaders = (replicas: readonly Replica[]) => replicas.filter((r) => r.leadership.isLeader)

/** The median and the worst of some durations, for the take-over report. */
export function medianAndWorst(values: readonly number[]): { median: number; worst: number } {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  const median = sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
  return { median, worst: sorted.at(-1)! }
}
