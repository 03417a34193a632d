/** The `--names FILE` of a batch `issue`: one name per line; and the one-line report of everything wrong in it. */
import { nameProblem } from '../src/core/names.js'
import { printable } from './serial.js'
import { PkiError, UsageError } from './errors.js'

/** Upper bound of names in one run (a typo such as a binary file given as FILE is caught early). */
export const MAX_NAMES = 100_000

/** One name to issue, with the 1-based line of the file it came from (0 for a name from the command line). */
export interface NameEntry {
  readonly name: string
  readonly line: number
}

/** Something that stops a run before anything is written; `usage` problems exit 2, the others 1. */
export interface Problem {
  readonly line: number
  readonly message: string
  readonly usage: boolean
}

/** Splits a names file; blank lines and `#` comments are skipped, surrounding spaces ignored. */
export function parseNamesFile(text: string): { entries: NameEntry[]; problems: Problem[] } {
  const entries: NameEntry[] = []
  const problems: Problem[] = []
  const firstLine = new Map<string, number>()
  for (const [i, raw] of text.split(/\r?\n/).entries()) {
    const name = raw.trim()
    const line = i + 1
    if (name === '' || name.startsWith('#')) continue
    const problem = nameProblem(name)
    const seen = firstLine.get(name)
    if (problem !== null) problems.push({ line, message: `invalid name "${printable(name)}": ${problem}`, usage: true })
    else if (seen !== undefined) problems.push({ line, message: `"${name}" is already listed on line ${seen}`, usage: true })
    else {
      firstLine.set(name, line)
      entries.push({ name, line })
    }
  }
  if (entries.length + problems.length > MAX_NAMES) problems.push({ line: 0, message: `more than ${MAX_NAMES} names`, usage: true })
  return { entries, problems }
}

/** Throws the first problem (by line) as one sentence; `source` (the file) is named when there is one. */
export function throwFirstProblem(problems: readonly Problem[], source: string | null): void {
  const sorted = [...problems].sort((a, b) => a.line - b.line)
  const first = sorted[0]
  if (first === undefined) return
  if (source === null) throw first.usage ? new UsageError(first.message) : new PkiError(first.message)
  const where = first.line === 0 ? source : `${source} line ${first.line}`
  const count = sorted.length > 1 ? `${sorted.length} problems in all, the first shown; ` : ''
  const message = `${where}: ${first.message} (${count}nothing was issued)`
  throw sorted.every((p) => p.usage) ? new UsageError(message) : new PkiError(message)
}
