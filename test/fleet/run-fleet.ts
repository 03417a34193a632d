/** Runs the compiled fleet simulator (dist/bench/fleet/cli.js, built by `npm test`) as a child process. */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** The compiled simulator's entry. */
export const CLI = fileURLToPath(new URL('../../dist/bench/fleet/cli.js', import.meta.url))

/** Runs the compiled simulator with `args`; resolves with its exit code and output. */
export function runFleet(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })))
}
