/**
 * Renews the leader's etcd lease from a worker thread (lease-keeper-worker.ts), so that a busy event loop
 * cannot cost a healthy leader its lease. Measured at 10,000 nodes on 2 cores (TTL 2 s): under a drain of
 * 100 nodes the leader's loop turns grew past the half second a renewal on the same loop can wait, the
 * leader stepped down, the other replica inherited the storm and stepped down in turn (five terms in two
 * minutes, 73,000 shards stopped). On its own thread a renewal is sent and read on time.
 *
 * What does not change: the renew deadline is decided on the controller's thread, at every use, from the
 * sending time of the last renewal etcd accepted (shared memory, the same monotonic clock), so a frozen
 * process (SIGSTOP: every thread stops) still learns on waking that its term is over. What the worker
 * must not do is keep a stuck controller in office: it renews only while the controller's thread shows
 * life within one TTL: a heartbeat its loop's timers write every 100 ms, and `showLife()`, which the
 * replica calls for every request it serves. A timer alone does not tell a stuck thread from a busy one:
 * one poll phase reading thousands of sockets runs no timer, and at 10,000 nodes (TTL 2 s) a leader
 * serving a drain's deposits and claims without pause for over 2 s lost its term that way, and the
 * replica that took over inherited the storm (10,322 node expiries audited, 66,858 shards stopped).
 */
import { Worker } from 'node:worker_threads'
import { extname } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { EtcdConnectionConfig } from './etcd-api.js'
import type { KeeperMessage, WorkerMessage } from './lease-keeper-protocol.js'
import type { LeaseTiming } from './lease-session.js'

/** What a kept lease reports (on the controller's thread, whenever its loop reads the worker's messages). */
export interface KeptLeaseHooks {
  onRenewed(): void
  onGone(): void
  onRenewError(err: Error): void
}

/** One lease the keeper renews. */
export interface KeptLease {
  /** process.hrtime.bigint() when the last renewal etcd accepted was sent (the grant's sending at first). */
  lastRenewSentAt(): bigint
  /** Stops renewing it (the lease itself stays until revoked or expired). */
  stop(): void
}

/** Renews one lease at a time for a Leadership. */
export interface LeaseKeeper {
  /**
   * Resolves once the thread runs with its client (started now if it is not running). Until then a
   * LeaseSession renews on its own thread and hands the lease over after (lease-session.ts): the thread's
   * start-up (loading the etcd client, reading its PEM files) must not hold up a campaign.
   */
  ready(): Promise<void>
  /** True while the thread runs with its client (a lease kept now is renewed from its first interval). */
  isReady(): boolean
  keep(leaseId: string, timing: LeaseTiming, grantSentAt: bigint, hooks: KeptLeaseHooks): KeptLease
  close(): Promise<void>
}

/** How often the controller's thread writes its heartbeat. */
const HEARTBEAT_MS = 100

/**
 * The worker's module: the built one beside this one. Run from the sources (the tests, under tsx) it is
 * still the built one in dist/ (npm test builds first): Node 20's workers do not inherit tsx's loader.
 */
const WORKER_URL =
  extname(fileURLToPath(import.meta.url)) === '.ts'
    ? new URL('../../dist/src/ha/lease-keeper-worker.js', import.meta.url)
    : new URL('./lease-keeper-worker.js', import.meta.url)

export class ThreadLeaseKeeper implements LeaseKeeper {
  private worker: Worker | null = null
  private readiness: Promise<void> | null = null
  /** True from the current worker's 'ready' until it dies or is dropped (set and cleared with `worker`). */
  private running = false
  private readonly heartbeat = new BigInt64Array(new SharedArrayBuffer(8))
  private readonly beat: NodeJS.Timeout
  private kept: { readonly leaseId: string; readonly hooks: KeptLeaseHooks } | null = null
  private closed = false

  constructor(private readonly etcd: EtcdConnectionConfig) {
    Atomics.store(this.heartbeat, 0, process.hrtime.bigint())
    this.beat = setInterval(() => Atomics.store(this.heartbeat, 0, process.hrtime.bigint()), HEARTBEAT_MS)
    this.beat.unref()
  }

  /**
   * The controller's thread is doing work (a request it serves): the heartbeat, as the timer writes it.
   * A few tens of nanoseconds; a thread stuck in one call never gets here.
   */
  showLife(): void {
    Atomics.store(this.heartbeat, 0, process.hrtime.bigint())
  }

  ready(): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the lease keeper is closed'))
    this.started()
    return this.readiness!
  }

  isReady(): boolean {
    return this.running
  }

  keep(leaseId: string, timing: LeaseTiming, grantSentAt: bigint, hooks: KeptLeaseHooks): KeptLease {
    if (this.closed) throw new Error('the lease keeper is closed')
    const stamp = new BigInt64Array(new SharedArrayBuffer(8))
    Atomics.store(stamp, 0, grantSentAt)
    Atomics.store(this.heartbeat, 0, process.hrtime.bigint())
    this.kept = { leaseId, hooks }
    this.send({ type: 'keep', leaseId, timing, stamp: stamp.buffer as SharedArrayBuffer })
    return {
      lastRenewSentAt: () => Atomics.load(stamp, 0),
      stop: () => {
        if (this.kept?.leaseId !== leaseId) return
        this.kept = null
        this.send({ type: 'stop', leaseId })
      },
    }
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    clearInterval(this.beat)
    this.kept = null
    const worker = this.worker
    this.worker = null
    this.running = false
    if (worker === null) return
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()))
    worker.postMessage({ type: 'close' } satisfies KeeperMessage)
    const timer = setTimeout(() => void worker.terminate(), 2000)
    await exited
    clearTimeout(timer)
  }

  private send(m: KeeperMessage): void {
    this.started().postMessage(m)
  }

  /** The worker, started on first use and again after it died (its lease then lapses: the deadline ends the term). */
  private started(): Worker {
    if (this.worker !== null) return this.worker
    const worker = new Worker(WORKER_URL, { workerData: { etcd: this.etcd, heartbeat: this.heartbeat.buffer } })
    worker.unref()
    let settle: { resolve: () => void; reject: (err: Error) => void } | null = null
    this.readiness = new Promise<void>((resolve, reject) => (settle = { resolve, reject }))
    this.readiness.catch(() => undefined) // asked for by ready(); a keep() alone does not wait
    worker.on('message', (m: WorkerMessage) => {
      if (m.type === 'ready') {
        this.running = this.worker === worker
        return settle?.resolve()
      }
      const kept = this.kept
      if (m.type === 'error' && m.leaseId === null) {
        // Its client could not be made: this worker is of no use, the next ready() starts another.
        settle?.reject(new Error(`lease keeper: ${m.message}`))
        kept?.hooks.onRenewError(new Error(`lease keeper: ${m.message}`))
        if (this.worker === worker) {
          this.worker = null
          this.running = false
          void worker.terminate()
        }
        return
      }
      if (kept === null || m.leaseId !== kept.leaseId) return
      if (m.type === 'renewed') kept.hooks.onRenewed()
      else if (m.type === 'gone') kept.hooks.onGone()
      else kept.hooks.onRenewError(new Error(m.message))
    })
    const died = (err: Error) => {
      settle?.reject(new Error(`lease keeper thread ended: ${err.message}`))
      if (this.worker !== worker) return
      this.worker = null
      this.running = false
      if (!this.closed) this.kept?.hooks.onRenewError(new Error(`lease keeper thread ended: ${err.message}`))
    }
    worker.on('error', died)
    worker.on('exit', (code) => died(new Error(`exit code ${code}`)))
    this.worker = worker
    return worker
  }
}
