/**
 * Spawns the real `pxe-pki` CLI as a child process. The sources under pki/ and src/ are
 * transpiled once with TypeScript's transpileModule into `.tap/pki-cli/<hash of the sources>/` inside the
 * repository (so node_modules resolves), and the CLI runs as `node <that>/pki/cli.js <args>`: loading a
 * TypeScript loader in every child costs seconds on a shared machine. To test the compiled build instead,
 * make cliEntry() return `dist/pki/cli.js` (after `npm run build`).
 */
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdir, readdir, readFile, rename, rm, writeFile, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { runCli as runInProcess } from '../../pki/cli-main.js'

/** The repository root (two levels above this file). */
export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** What one CLI run produced. */
export interface CliResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Every TypeScript source under pki/ and src/ (the CLI may import any of src/, e.g. the audit verifier). */
async function sources(): Promise<string[]> {
  const found: string[] = []
  for (const top of ['pki', 'src']) {
    const entries = await readdir(join(REPO_ROOT, top), { recursive: true })
    found.push(...entries.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')).map((f) => `${top}/${f}`))
  }
  return found.sort()
}

let entry: Promise<string> | undefined

async function build(): Promise<string> {
  const files = await sources()
  const texts = await Promise.all(files.map((f) => readFile(join(REPO_ROOT, f), 'utf8')))
  const hash = createHash('sha256')
  files.forEach((f, i) => hash.update(f).update('\0').update(texts[i]!).update('\0'))
  const out = join(REPO_ROOT, '.tap', 'pki-cli', hash.digest('hex').slice(0, 16))
  const cli = join(out, 'pki', 'cli.js')
  if (await stat(cli).then(() => true, () => false)) return cli
  const tmp = `${out}.tmp-${process.pid}`
  for (const [i, f] of files.entries()) {
    const js = ts.transpileModule(texts[i]!, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true },
      fileName: f,
    }).outputText
    const target = join(tmp, f.replace(/\.ts$/, '.js'))
    await mkdir(dirname(target), { recursive: true })
    await writeFile(target, js)
  }
  await writeFile(join(tmp, 'package.json'), '{"type":"module"}\n')
  // Another test file may have built the same hash meanwhile; either copy is fine.
  await rename(tmp, out).catch(() => rm(tmp, { recursive: true, force: true }))
  return cli
}

/** The JavaScript entry point of the CLI, built on first use. */
export function cliEntry(): Promise<string> {
  entry ??= build()
  return entry
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
