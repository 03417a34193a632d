/**
 * The bench's target processes (mtls-target.ts), one per target and server key, and the reading of
 * their CPU. A target answers `'cpu'` over IPC with its `process.cpuUsage()`: user + system time of the
 * whole process, every thread included (libuv's pool, V8's helpers), so work moved off the main thread
 * is counted too.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** What a target process serves: the controller (file store, or HA on etcd) or the ceiling. */
export type TargetKind = 'controller' | 'controller-ha' | 'ceiling'
/** The server's key: RSA-2048 or P-256 (the node keys of the same run match it). */
export type ServerKey = 'rsa' | 'ec'

/** A running target. */
export interface Target {
  readonly kind: TargetKind
  readonly key: ServerKey
  readonly port: number
  readonly child: ChildProcess
  /** The process's CPU time so far, in µs (all threads), read over IPC. */
  cpuMicros(): Promise<number>
}

/** How a bench table names a server key. */
export const KEY_LABEL: Readonly<Record<ServerKey, string>> = { rsa: 'RSA-2048', ec: 'P-256' }

interface CpuReply {
  readonly cpu: { readonly user: number; readonly system: number }
}

const isCpuReply = (msg: unknown): msg is CpuReply => typeof msg === 'object' && msg !== null && 'cpu' in msg

/** Starts a target process and waits for its port; `extra` follows the key on its command line (controller-ha: the ha.json). */
export function startTarget(kind: TargetKind, key: ServerKey, root: string, extra: readonly string[] = []): Promise<Target> {
  const entry = fileURLToPath(new URL('./mtls-target.js', import.meta.url))
  // stdout (the controller's pino info lines) is discarded; stderr stays visible for failures.
  // PXE_BENCH_PROFILE_DIR (bench/profile-connections.ts): the target runs under `node --cpu-prof` (its
  // profile lands in that folder when it exits), to see where a connection's CPU goes.
  const profileDir = process.env['PXE_BENCH_PROFILE_DIR']
  const execArgv = profileDir === undefined ? process.execArgv : [...process.execArgv, '--cpu-prof', '--cpu-prof-dir', profileDir]
  const child = fork(entry, [kind, root, key, ...extra], { stdio: ['ignore', process.env.PXE_BENCH_TARGET_STDOUT === '1' ? 'inherit' : 'ignore', 'inherit', 'ipc'], execArgv })
  const waiting: Array<(micros: number) => void> = []
  child.on('message', (msg: unknown) => {
    if (isCpuReply(msg)) waiting.shift()?.(msg.cpu.user + msg.cpu.system)
  })
  const cpuMicros = (): Promise<number> =>
    new Promise((resolve, reject) => {
      if (!child.connected) return reject(new Error(`${kind} (${key}) target is gone`))
      waiting.push(resolve)
      child.send('cpu')
    })
  return new Promise((resolve, reject) => {
    child.once('message', (msg: { port: number }) => resolve({ kind, key, port: msg.port, child, cpuMicros }))
    child.once('exit', (code) => reject(new Error(`${kind} (${key}) target exited with code ${code} before listening`)))
  })
}

/** Stops a target (it exits when its IPC channel closes). */
export function stopTarget(target: Target): Promise<void> {
  return new Promise((resolve) => {
    if (target.child.exitCode !== null) return resolve()
    target.child.once('exit', () => resolve())
    target.child.disconnect()
  })
}
