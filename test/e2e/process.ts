/** Starts the compiled controller (dist/, built by `npm test`) as a child process and waits for it. */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

export const MAIN = fileURLToPath(new URL('../../dist/src/main.js', import.meta.url))

export interface ChildController {
  readonly child: ChildProcess
  readonly port: number
  /** The ops endpoint's port (it listens before the mTLS listener), or null when it is off. */
  readonly opsPort: number | null
  stdout(): string
  stderr(): string
  /** Resolves with the exit code (or signal) once the process ended. */
  exited: Promise<number | string>
}

/** Spawns `node ...nodeArgs dist/src/main.js ...args` and resolves once it listens (or rejects when it exits). */
export function spawnController(args: string[], cwd: string, timeoutMs = 60_000, nodeArgs: readonly string[] = []): Promise<ChildController> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run "npm run build" (npm test does it first)`)
  const child = spawn(process.execPath, [...nodeArgs, MAIN, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LOG_LEVEL: 'info' } })
  let out = ''
  let err = ''
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`controller did not start in ${timeoutMs} ms\n${out}\n${err}`))
    }, timeoutMs)
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString()
      const m = /"port":(\d+),"mode":"[a-z]+","msg":"controller listening/.exec(out)
      if (m) {
        clearTimeout(timer)
        const ops = /ops endpoint listening on \S+:(\d+) /.exec(out)
        resolve({ child, port: Number(m[1]), opsPort: ops ? Number(ops[1]) : null, stdout: () => out, stderr: () => err, exited })
      }
    })
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()))
    void exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`controller exited (${code}) before listening\n${out}\n${err}`))
    })
  })
}

/**
 * Runs the controller to completion (for starts that must fail); returns exit code and output. A start
 * that does not end within `timeoutMs` (a regression that let a bad config listen) is killed and
 * reported as code 'timeout', so the test fails fast instead of hanging.
 */
export function runController(args: string[], cwd: string, timeoutMs = 30_000): Promise<{ code: number | string; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [MAIN, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    child.kill('SIGKILL')
  }, timeoutMs)
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  // 'close', not 'exit': 'exit' can come before the last of stderr has been read (seen on a loaded box).
  return new Promise((resolve) =>
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code: timedOut ? 'timeout' : (code ?? signal ?? -1), stdout, stderr })
    }),
  )
}
