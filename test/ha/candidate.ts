/** Runs candidate-child.mjs (on the compiled modules in dist/) in a child process and reads its JSON events. */
import type { ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'
import { exited, spawnGuarded, type EtcdCluster } from '../support/etcd-cluster.js'

const CHILD = fileURLToPath(new URL('./candidate-child.mjs', import.meta.url))
const BUILT = fileURLToPath(new URL('../../dist/src/ha/leader-election.js', import.meta.url))

/** One event line of the child; `at` is the child's monotonic time, `receivedAt` the parent's. */
export interface ChildEvent {
  readonly event: string
  readonly at: number
  readonly receivedAt: number
  readonly [field: string]: unknown
}

/** A candidate process. */
export interface Candidate {
  readonly id: string
  readonly process: ChildProcess
  readonly events: ChildEvent[]
  /** Resolves with the first event (already seen or to come) that matches; rejects after `timeoutMs`. */
  waitFor(match: (e: ChildEvent) => boolean, timeoutMs: number, what: string): Promise<ChildEvent>
  signal(signal: NodeJS.Signals): void
  stderr(): string
}

/** Starts a candidate with controller_id `id`; it is killed at the test's teardown. */
export function spawnCandidate(t: Test, cluster: EtcdCluster, opts: { id: string; prefix: string; ttl: number }): Candidate {
  if (!existsSync(BUILT)) throw new Error(`${BUILT} is missing: run "npm run build" (npm test does it first)`)
  const config = { connection: cluster.connection, prefix: opts.prefix, id: opts.id, ttl: opts.ttl }
  const child = spawnGuarded(process.execPath, ['--enable-source-maps', CHILD, JSON.stringify(config)])
  t.teardown(async () => {
    child.kill('SIGKILL')
    await exited(child)
  })
  const events: ChildEvent[] = []
  const waiters = new Set<() => void>()
  let partial = ''
  let err = ''
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString()).split('\n')
    partial = lines.pop() ?? ''
    const receivedAt = performance.now()
    for (const line of lines) if (line.trim()) events.push({ ...(JSON.parse(line) as ChildEvent), receivedAt })
    for (const wake of waiters) wake()
  })
  child.stderr!.on('data', (chunk: Buffer) => (err = (err + chunk.toString()).slice(-8000)))
  const waitFor = (match: (e: ChildEvent) => boolean, timeoutMs: number, what: string) =>
    new Promise<ChildEvent>((resolve, reject) => {
      const check = () => {
        const found = events.find(match)
        if (!found) return
        cleanup()
        resolve(found)
      }
      const timer = setTimeout(() => {
        cleanup()
        reject(new Error(`candidate ${opts.id}: no ${what} within ${timeoutMs} ms\nstderr: ${err}\nevents: ${JSON.stringify(events.slice(-20))}`))
      }, timeoutMs)
      const cleanup = () => {
        clearTimeout(timer)
        waiters.delete(check)
      }
      waiters.add(check)
      check()
    })
  return { id: opts.id, process: child, events, waitFor, signal: (s) => child.kill(s), stderr: () => err }
}
