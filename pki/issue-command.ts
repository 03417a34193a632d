/** The handlers of `issue` (one name, or `--names FILE`) and `sign-csr`: flags in, one or a few lines out. */
import { readFile, stat } from 'node:fs/promises'
import { dirname } from 'node:path'
import { performance } from 'node:perf_hooks'
import { expectPositionals, stringFlag } from './args.js'
import type { ParsedArgs } from './args.js'
import { issueBundle, issueBundles, signCsr } from './issue-certs.js'
import type { IssuedBundle } from './issue-certs.js'
import { replacementNote } from './leaf.js'
import { describeKeySpec, checkKeySpec } from './keys.js'
import type { KeyType } from './keys.js'
import { parseNamesFile } from './names-file.js'
import { checkRole, parseIntFlag } from './validate.js'
import { PkiError } from './errors.js'

/** What a handler prints: results on stdout, progress and notes on stderr. */
export interface HandlerContext {
  readonly dir: string
  readonly print: (text: string) => void
  readonly notice: (text: string) => void
}

/** Largest names file read (100,000 names of 64 characters fit in 7 MB). */
const MAX_NAMES_FILE_BYTES = 8 * 1024 * 1024
/** A progress line every this many bundles, or every second, whichever comes first. */
const PROGRESS_EVERY = 250

/** A decimal flag's value, or undefined when absent. */
export function intFlag(args: ParsedArgs, name: string): number | undefined {
  const value = stringFlag(args, name)
  return value === undefined ? undefined : parseIntFlag(value, `--${name}`)
}

async function readInput(path: string, what: string, maxBytes: number): Promise<string> {
  try {
    if ((await stat(path)).size > maxBytes) throw new PkiError(`${what} ${path} is larger than ${maxBytes} bytes`)
    return await readFile(path, 'utf8')
  } catch (err) {
    if (err instanceof PkiError) throw err
    throw new PkiError(`cannot read ${what} ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
}

/** Prints `signed 750/10000 (312/s)` lines on stderr, then `wrote ...` as bundles reach the disk. */
function progressPrinter(notice: (text: string) => void): (phase: 'signed' | 'written', done: number, total: number) => void {
  let phase: 'signed' | 'written' | undefined
  let phaseStart = performance.now()
  let lastAt = phaseStart
  let lastDone = 0
  return (current, done, total) => {
    const now = performance.now()
    if (current !== phase) {
      // A phase starts when the previous one printed its last line (each phase always prints its end).
      phase = current
      phaseStart = lastAt
      lastDone = 0
    }
    if (done < total && done - lastDone < PROGRESS_EVERY && now - lastAt < 1000) return
    const rate = Math.round(done / Math.max((now - phaseStart) / 1000, 0.001))
    notice(`${current === 'signed' ? 'signed' : 'wrote'} ${done}/${total} (${rate}/s)`)
    lastAt = now
    lastDone = done
  }
}

/** One line per replacing bundle: the serials it replaces and where the old folder went. */
function bundleReport(b: IssuedBundle): string {
  const parts = [replacementNote(b.replaces), b.movedAside === null ? '' : `old bundle moved to ${b.movedAside}`]
  return `${b.name}: ${parts.filter((p) => p !== '').join('; ')}`
}

/** `issue <name>` or `issue --names FILE`. */
export async function runIssue(args: ParsedArgs, ctx: HandlerContext): Promise<void> {
  const namesFile = stringFlag(args, 'names')
  expectPositionals('issue', args, namesFile === undefined ? 1 : 0, namesFile === undefined ? 1 : 0, 'a name, or --names FILE (not both)')
  const role = checkRole(stringFlag(args, 'role'))
  const keyType = stringFlag(args, 'key-type') as KeyType | undefined
  const keyBits = intFlag(args, 'key-bits')
  const key = describeKeySpec(checkKeySpec(keyType, keyBits))
  const opts = { days: intFlag(args, 'days'), keyType, keyBits, outDir: stringFlag(args, 'out'), replace: args.values.replace === true }
  if (namesFile === undefined) {
    const b = await issueBundle(ctx.dir, args.positionals[0]!, role, opts)
    ctx.print(`issued ${role} certificate ${b.serial}; bundle ${b.bundleDir} (${key} key)`)
    if (b.replaces.length > 0 || b.movedAside !== null) ctx.print(bundleReport(b))
    return
  }
  const { entries, problems } = parseNamesFile(await readInput(namesFile, 'names file', MAX_NAMES_FILE_BYTES))
  const started = performance.now()
  const issued = await issueBundles(ctx.dir, entries, role, { ...opts, source: namesFile, problems, onProgress: progressPrinter(ctx.notice) })
  const seconds = (performance.now() - started) / 1000
  const replacing = issued.filter((b) => b.replaces.length > 0 || b.movedAside !== null)
  for (const b of replacing) ctx.print(bundleReport(b))
  const where = issued[0] === undefined ? '' : ` into ${dirname(issued[0].bundleDir)}`
  ctx.print(`issued ${issued.length} ${role} bundles (${key})${where} in ${seconds.toFixed(1)} s (${Math.round(issued.length / seconds)}/s)`)
}

/** `sign-csr <file>`: the certificate on stdout (alone, for pipes) or in FILE; a replacement note on stderr. */
export async function runSignCsr(args: ParsedArgs, ctx: HandlerContext): Promise<void> {
  expectPositionals('sign-csr', args, 1, 1, 'a CSR file')
  const role = checkRole(stringFlag(args, 'role'))
  const out = stringFlag(args, 'out')
  const csr = await readInput(args.positionals[0]!, 'CSR file', 1024 * 1024)
  const r = await signCsr(ctx.dir, csr, role, { days: intFlag(args, 'days'), out, replace: args.values.replace === true })
  if (out === undefined) {
    ctx.print(r.certPem.trimEnd())
    if (r.note !== '') ctx.notice(r.note)
  } else {
    ctx.print(`issued ${role} certificate ${r.serial} to ${out}${r.note === '' ? '' : `; ${r.note}`}`)
  }
}
