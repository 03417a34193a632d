/** The orchestrator's side of the agent workers: fork, start and stop agents, freeze or partition a process, collect records. */
import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { onInterrupt } from './interrupt.js'
import type { Delivery, FleetRecord, FromWorker, GatewayTarget, SessionOwner, ToWorker } from './protocol.js'

const WORKER = fileURLToPath(new URL('./agent-worker.js', import.meta.url))

/** What every worker needs to build its agents. */
export interface WorkerInit {
  readonly controllers: readonly string[]
  readonly ca: string
  readonly jwks: unknown
  readonly identifyIntervalMs: number
  /** The gateway the agents' discord.js clients use, or null (the callbacks only record). */
  readonly gateway: GatewayTarget | null
}

/** What only some workers get: slow stops and a partition proxy (for a slow-stop partition). */
export interface WorkerExtras {
  readonly slowStopMs: number
  readonly partitionable: boolean
}

const PLAIN: WorkerExtras = { slowStopMs: 0, partitionable: false }

/** Receives each batch a worker sends: its records, the test events its gateway clients delivered, the sessions they ran. */
export type OnRecords = (records: readonly FleetRecord[], deliveries: readonly Delivery[], owners: readonly SessionOwner[]) => void

type Waiter = { resolve(): void; reject(err: Error): void }

/** One worker process. */
class Worker {
  readonly child: ChildProcess
  private readonly waiters = new Map<string, Waiter>()
  exited = false
  /** The orchestrator signalled it to end (a node's reboot): its exit is no failure. */
  endExpected = false
  /** Resolves with the exit code or signal. */
  readonly exit: Promise<number | string>

  constructor(readonly index: number, onRecords: OnRecords, onExit: (index: number, code: number | string) => void) {
    // stdout is not used; stderr stays visible (a worker's crash must be seen).
    this.child = fork(WORKER, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
    this.child.on('message', (message: FromWorker) => {
      if (message.type === 'records') onRecords(message.records, message.deliveries ?? [], message.owners ?? [])
      else this.settle(message)
    })
    this.exit = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.exited = true
        for (const waiter of this.waiters.values()) waiter.reject(new Error(`worker ${index} exited (${code ?? signal})`))
        this.waiters.clear()
        if (!this.endExpected) onExit(index, code ?? signal ?? -1)
        resolve(code ?? signal ?? -1)
      })
    })
  }

  private settle(message: Exclude<FromWorker, { type: 'records' }>): void {
    const key = 'name' in message ? `${message.type === 'failed' ? 'started' : message.type}:${message.name}` : message.type
    const waiter = this.waiters.get(key)
    if (waiter === undefined) return
    this.waiters.delete(key)
    if (message.type === 'failed') waiter.reject(new Error(`agent ${message.name}: ${message.message}`))
    else waiter.resolve()
  }

  /** Sends a message and waits for the answer named `key`. */
  request(message: ToWorker, key: string): Promise<void> {
    if (this.exited) return Promise.reject(new Error(`worker ${this.index} has exited`))
    return new Promise((resolve, reject) => {
      this.waiters.set(key, { resolve, reject })
      this.child.send(message)
    })
  }
}

/** The agent worker processes of one run. */
export class WorkerPool {
  private readonly workers: Worker[] = []
  private closing = false
  private readonly unregister = onInterrupt(() => this.kill())
  private settings: { init: WorkerInit; extras: ReadonlyMap<number, WorkerExtras> } | null = null

  constructor(count: number, private readonly onRecords: OnRecords, private readonly onUnexpectedExit: (index: number, code: number | string) => void) {
    for (let i = 0; i < count; i++) this.workers.push(this.fork(i))
  }

  private fork(index: number): Worker {
    return new Worker(index, this.onRecords, (i, code) => {
      if (!this.closing) this.onUnexpectedExit(i, code)
    })
  }

  /** Sends every worker its settings (and its extras, by index) and waits until all are ready. */
  async init(init: WorkerInit, extras: ReadonlyMap<number, WorkerExtras> = new Map()): Promise<void> {
    this.settings = { init, extras }
    await Promise.all(this.workers.map((w) => this.initOne(w)))
  }

  private initOne(w: Worker): Promise<void> {
    const { init, extras } = this.settings!
    return w.request({ type: 'init', ...init, ...(extras.get(w.index) ?? PLAIN) }, 'ready')
  }

  /**
   * Ends a process the way a node's host would (a reboot): SIGTERM (its agents leave, as pxe-node's do)
   * or SIGKILL (everything in it vanishes: no stop, no leave, its sockets dropped by the kernel).
   * Resolves with its exit code or signal once it is gone; the exit is no failure of the run.
   */
  async end(process: number, signal: 'SIGTERM' | 'SIGKILL'): Promise<number | string> {
    const w = this.worker(process)
    if (w.exited) return w.exit
    w.endExpected = true
    w.child.kill(signal)
    return w.exit
  }

  /** A fresh process in place of an ended one (the rebooted node's), with the same settings. */
  async replace(process: number): Promise<void> {
    const old = this.worker(process)
    if (!old.exited) throw new Error(`worker ${process} still runs`)
    const w = this.fork(process)
    this.workers[process] = w
    await this.initOne(w)
  }

  /** Starts one agent in its process; resolves once it sent its first check-in. */
  startAgent(process: number, name: string, capacity: number, bundleDir: string): Promise<void> {
    return this.worker(process).request({ type: 'start', name, capacity, bundleDir }, `started:${name}`)
  }

  /** Stops one agent (its shards stop, as on a node shutdown); resolves once it has. */
  stopAgent(process: number, name: string): Promise<void> {
    return this.worker(process).request({ type: 'stop', name }, `stopped:${name}`)
  }

  /** Freezes a whole process (SIGSTOP): its agents and their shards stand still, timers included. */
  freeze(process: number): void {
    this.worker(process).child.kill('SIGSTOP')
  }

  /** Wakes a frozen process (SIGCONT). */
  thaw(process: number): void {
    this.worker(process).child.kill('SIGCONT')
  }

  /** Cuts a partitionable process's agents off the controller (its proxy forwards nothing); the process runs on. */
  partition(process: number): Promise<void> {
    return this.worker(process).request({ type: 'partition' }, 'partitioned')
  }

  /** Ends a partition: the proxy forwards again. */
  heal(process: number): Promise<void> {
    return this.worker(process).request({ type: 'heal' }, 'healed')
  }

  /** Stops every agent (shards stop, records flushed) and ends the processes. */
  async shutdown(): Promise<void> {
    this.closing = true
    await Promise.all(
      this.workers.map(async (w) => {
        if (w.exited) return
        w.child.kill('SIGCONT') // a frozen worker could not answer
        const gone = new Promise<void>((resolve) => w.child.once('exit', () => resolve()))
        await w.request({ type: 'shutdown' }, 'shutdown_done').catch(() => undefined)
        await gone
      }),
    )
  }

  /** Kills every process at once (after a failure of the orchestrator). */
  kill(): void {
    this.closing = true
    this.unregister()
    for (const w of this.workers) if (!w.exited) w.child.kill('SIGKILL')
  }

  private worker(index: number): Worker {
    const w = this.workers[index]
    if (w === undefined) throw new Error(`no worker ${index}`)
    return w
  }
}
