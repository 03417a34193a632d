/**
 * Spawns the real `pxe-pki` CLI as a child process: the compiled build, `node dist/pki/cli.js <args>`,
 * which `npm test` makes before any test runs (as the controller's child-process tests use
 * dist/src/main.js). Run `npm run build` first when running one test file by hand.
 */
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { runCli as runInProcess } from '../../pki/cli-main.js'

/** The repository root (two levels above this file). */
export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** What one CLI run produced. */
export interface CliResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const CLI = fileURLToPath(new URL('../../dist/pki/cli.js', import.meta.url))

/** The JavaScript entry point of the CLI (the build). */
export function cliEntry(): Promise<string> {
  if (!existsSync(CLI)) return Promise.reject(new Error(`${CLI} is missing: run npm run build (npm test does)`))
  return Promise.resolve(CLI)
}

/** Runs `pxe-pki <args>` from the repository root; resolves on exit (never rejects on a non-zero code). */
export async function runCli(args: readonly string[]): Promise<CliResult> {
  const cli = await cliEntry()
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { cwd: REPO_ROOT, env: { ...process.env, NODE_OPTIONS: '' }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** What one in-process CLI run printed: `out` (stdout) and `err` (stderr), one `\n` per line. */
export interface InProcessResult {
  readonly code: number
  readonly out: string
  readonly err: string
}

/** Runs `pxe-pki <args> --dir <dir>` in this process: the binary's code path minus process start-up. */
export async function cliIn(dir: string, ...args: string[]): Promise<InProcessResult> {
  let out = ''
  let err = ''
  const code = await runInProcess([...args, '--dir', dir], { out: (s) => (out += `${s}\n`), err: (s) => (err += `${s}\n`) })
  return { code, out, err }
}
