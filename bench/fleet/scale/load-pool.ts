/** The benchmark's load-generator processes: fork, ask, and add up their statuses. */
import { fork, type ChildProcess } from 'node:child_process'
import { setPriority } from 'node:os'
import { fileURLToPath } from 'node:url'
import { onInterrupt } from '../interrupt.js'
import { tally, type AnsweredTally, type FromLoad, type LoadNodeSpec, type LoadStatus, type LoopDelay, type ToLoad } from './load-protocol.js'

const WORKER = fileURLToPath(new URL('./load-worker.js', import.meta.url))

/** Sends a message and resolves with the first answer of type `reply`. */
function ask<T extends FromLoad['type']>(child: ChildProcess, message: ToLoad, reply: T): Promise<Extract<FromLoad, { type: T }>> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: FromLoad) => {
      if (m.type !== reply) return
      child.off('message', onMessage)
      child.off('exit', onExit)
      resolve(m as Extract<FromLoad, { type: T }>)
    }
    const onExit = (code: number | null) => reject(new Error(`a load generator exited (${code}) while asked ${message.type}`))
    child.on('message', onMessage)
    child.once('exit', onExit)
    child.send(message)
  })
}

/** Load-generator processes, each driving a slice of the nodes. */
export class LoadPool {
  private readonly children: ChildProcess[]
  private readonly unregister = onInterrupt(() => this.kill())

  /**
   * `nice`: the processes' scheduling priority (os.setPriority; 0 keeps the benchmark's own). They stand
   * in for 10,000 machines that each have a CPU of their own, so by default they take only the CPU the
   * controller leaves: at equal priority, in a storm the generators' reconnect work (every attempt builds
   * a TLS client, also the ones deferred) took 1.6 of the 2 cores, the controller's handshakes slowed,
   * admission deferred more, and the generators spun harder. `profileDir`: each process writes a CPU
   * profile there when it ends (node --cpu-prof), to tell whether a slow phase was the generators'.
   */
  constructor(count: number, nice = 0, profileDir?: string) {
    const execArgv = profileDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', profileDir]
    // Each process holds thousands of sockets; stderr stays visible.
    this.children = Array.from({ length: count }, () => fork(WORKER, [], { execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] }))
    if (nice !== 0) for (const child of this.children) setPriority(child.pid!, nice)
  }

  /** The process IDs (to read their CPU from /proc). */
  get pids(): number[] {
    return this.children.map((c) => c.pid!)
  }

  /** Gives each process its slice of the nodes; resolves once every certificate is loaded. */
  async init(ports: readonly number[], ca: string, nodes: readonly LoadNodeSpec[]): Promise<void> {
    const per = Math.ceil(nodes.length / this.children.length)
    await Promise.all(this.children.map((c, i) => ask(c, { type: 'init', ports, ca, nodes: nodes.slice(i * per, (i + 1) * per) }, 'ready')))
  }

  /** Every node starts checking in, within `spreadMs`. */
  async start(spreadMs: number): Promise<void> {
    await Promise.all(this.children.map((c) => ask(c, { type: 'start', spreadMs }, 'started')))
  }

  /** Every node notes its plan and fail-safe deadline (just before a kill -9). */
  async mark(): Promise<void> {
    await Promise.all(this.children.map((c) => ask(c, { type: 'mark' }, 'marked')))
  }

  /** Every node tracks moves from now (the drain phase), or stops tracking them. */
  async track(on: boolean): Promise<void> {
    await Promise.all(this.children.map((c) => ask(c, { type: 'track', on }, 'tracked')))
  }

  /** The statuses of every process, added up. */
  async status(): Promise<LoadStatus> {
    const all = await Promise.all(this.children.map((c) => ask(c, { type: 'status' }, 'status')))
    return combine(all.map((m) => m.status))
  }

  /** Stops every node and ends the processes. */
  async stop(): Promise<void> {
    await Promise.all(
      this.children.map(async (c) => {
        if (c.exitCode !== null) return
        const gone = new Promise<void>((resolve) => c.once('exit', () => resolve()))
        await ask(c, { type: 'stop' }, 'stopped').catch(() => undefined)
        await gone
      }),
    )
  }

  /** Kills every process (after a failure). */
  kill(): void {
    this.unregister()
    for (const c of this.children) if (c.exitCode === null) c.kill('SIGKILL')
  }
}

const maxOrNull = (values: (number | null)[]): number | null => values.reduce<number | null>((m, v) => (v === null ? m : m === null ? v : Math.max(m, v)), null)
const minOrNull = (values: (number | null)[]): number | null => values.reduce<number | null>((m, v) => (v === null ? m : m === null ? v : Math.min(m, v)), null)
const sum = (values: number[]): number => values.reduce((a, b) => a + b, 0)

/** Adds up the statuses of several processes. */
export function combine(all: readonly LoadStatus[]): LoadStatus {
  const maxGeneration = maxOrNull(all.map((s) => s.maxGeneration))
  const atMax = all.filter((s) => s.maxGeneration === maxGeneration)
  const counters = tally(all.map((s) => s.counters))
  return {
    nodes: sum(all.map((s) => s.nodes)),
    answered: sum(all.map((s) => s.answered)),
    lastFirstAnswerAt: maxOrNull(all.map((s) => s.lastFirstAnswerAt)),
    minGeneration: minOrNull(all.map((s) => s.minGeneration)),
    maxGeneration,
    lastReachedMaxAt: maxOrNull(atMax.map((s) => s.lastReachedMaxAt)),
    atMaxGeneration: sum(atMax.map((s) => s.atMaxGeneration)),
    markRenewed: sum(all.map((s) => s.markRenewed)),
    markSame: sum(all.map((s) => s.markSame)),
    markLostShards: sum(all.map((s) => s.markLostShards)),
    markLate: sum(all.map((s) => s.markLate)),
    markLateByFailSafe: tally(all.map((s) => s.markLateByFailSafe)),
    markLateAttempts: tally(all.map((s) => s.markLateAttempts)),
    markLateWithinLag: sum(all.map((s) => s.markLateWithinLag)),
    markRenewalAgeBySecond: tally(all.map((s) => s.markRenewalAgeBySecond)),
    markLateRenewalAgeBySecond: tally(all.map((s) => s.markLateRenewalAgeBySecond)),
    markLoopDelayMs: worstDelay(all.map((s) => s.markLoopDelayMs)),
    markAnswered: {
      late: answeredOf(all.map((s) => s.markAnswered.late)),
      onTime: answeredOf(all.map((s) => s.markAnswered.onTime)),
    },
    markLastAt: maxOrNull(all.map((s) => s.markLastAt)),
    shardsHeld: sum(all.map((s) => s.shardsHeld)),
    movesMissing: sum(all.map((s) => s.movesMissing)),
    movesDeposits: sum(all.map((s) => s.movesDeposits)),
    lastClaimAt: maxOrNull(all.map((s) => s.lastClaimAt)),
    counters,
    cpuSeconds: sum(all.map((s) => s.cpuSeconds)),
  }
}

/** The generators' tallies of one group of answered attempts, added up. */
function answeredOf(all: readonly AnsweredTally[]): AnsweredTally {
  const of = (key: keyof AnsweredTally) => tally(all.map((t) => t[key]))
  return { leadMs: of('leadMs'), tookMs: of('tookMs'), tcpMs: of('tcpMs'), tlsMs: of('tlsMs'), replyMs: of('replyMs'), lagMs: of('lagMs') }
}

/** The worst of several processes' event-loop delays, percentile by percentile. */
function worstDelay(all: readonly (LoopDelay | null)[]): LoopDelay | null {
  const known = all.filter((d): d is LoopDelay => d !== null)
  if (known.length === 0) return null
  return { p50: Math.max(...known.map((d) => d.p50)), p99: Math.max(...known.map((d) => d.p99)), max: Math.max(...known.map((d) => d.max)) }
}
