/**
 * The worker thread of lease-keeper.ts: renews the leader's lease on a client of its own, so that the
 * renewals go out and are read on time however long the controller's own event-loop turns are. It
 * renews only while the controller's thread shows life (its heartbeat in shared memory is younger than
 * the TTL), and once it finds the heartbeat older it stops renewing that lease for good: a thread stuck
 * in a loop must lose its leadership, not keep it through a helper. Each
 * accepted renewal's sending time goes to the lease's shared stamp, where the controller's thread reads
 * it at every use (the renew deadline is still decided there, on the same monotonic clock).
 */
import { parentPort, workerData } from 'node:worker_threads'
import { EtcdClientError, type EtcdConnectionConfig } from './etcd-api.js'
import { connectEtcd } from './etcd-client.js'
import type { KeeperMessage, WorkerMessage } from './lease-keeper-protocol.js'

interface Kept {
  readonly leaseId: string
  readonly stamp: BigInt64Array
  readonly ttlNs: bigint
  readonly intervalMs: number
  readonly attemptTimeoutMs: number
  readonly retryDelayMs: number
  stopped: boolean
}

const port = parentPort
if (port === null) throw new Error('lease-keeper-worker runs as a worker thread only')
const { etcd, heartbeat } = workerData as { etcd: EtcdConnectionConfig; heartbeat: SharedArrayBuffer }
const beat = new BigInt64Array(heartbeat)
const post = (m: WorkerMessage) => port.postMessage(m)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)))
let current: Kept | null = null
// The client connects at its first call; reading and checking its PEM files takes a moment.
const client = connectEtcd(etcd)

async function renew(lease: Kept): Promise<void> {
  while (!lease.stopped) {
    const sentAt = process.hrtime.bigint()
    if (sentAt - Atomics.load(beat, 0) > lease.ttlNs) {
      // The controller's thread has not turned its loop for a whole TTL: let the lease run out, for good.
      // Renewing again once it wakes could keep a term that a stall of up to two TTLs should have ended;
      // this way it ends at its renew deadline, at most about two TTLs after the stall began.
      lease.stopped = true
      return post({ type: 'error', leaseId: lease.leaseId, message: 'the controller thread showed no life for one TTL: renewals stopped' })
    }
    try {
      const ttl = await (await client).keepAliveOnce(lease.leaseId, lease.attemptTimeoutMs)
      if (lease.stopped) return
      if (ttl <= 0) return post({ type: 'gone', leaseId: lease.leaseId })
      if (sentAt > Atomics.load(lease.stamp, 0)) Atomics.store(lease.stamp, 0, sentAt)
      post({ type: 'renewed', leaseId: lease.leaseId })
      await sleep(lease.intervalMs - Number(process.hrtime.bigint() - sentAt) / 1e6)
    } catch (err) {
      if (lease.stopped) return
      if (err instanceof EtcdClientError && err.kind === 'lease_not_found') return post({ type: 'gone', leaseId: lease.leaseId })
      post({ type: 'error', leaseId: lease.leaseId, message: (err as Error).message })
      await sleep(lease.retryDelayMs)
    }
  }
}

port.on('message', (m: KeeperMessage) => {
  if (m.type === 'keep') {
    if (current) current.stopped = true
    current = {
      leaseId: m.leaseId,
      stamp: new BigInt64Array(m.stamp),
      ttlNs: BigInt(m.timing.ttlSeconds) * 1_000_000_000n,
      intervalMs: m.timing.renewIntervalMs,
      attemptTimeoutMs: m.timing.attemptTimeoutMs,
      retryDelayMs: m.timing.retryDelayMs,
      stopped: false,
    }
    void renew(current)
  } else if (m.type === 'stop') {
    if (current?.leaseId === m.leaseId) {
      current.stopped = true
      current = null
    }
  } else {
    if (current) current.stopped = true
    current = null
    void client.then((c) => c.close()).finally(() => port.close())
  }
})
client.then(
  () => post({ type: 'ready' }),
  (err: unknown) => post({ type: 'error', leaseId: null, message: (err as Error).message }),
)
