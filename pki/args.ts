/** Command-line parsing (src/cli-kit/argv.ts over node:util parseArgs), with the toolkit's own error sentences. */
import { ArgvError, parseArgv, type FlagDef } from '../src/cli-kit/argv.js'
import { UsageError } from './errors.js'
import { printable } from './serial.js'

/** Option definitions of one command (string or boolean flags, optionally repeatable). */
export type OptionDefs = Record<string, FlagDef>

/** Parsed flags and positionals of one command. */
export interface ParsedArgs {
  readonly values: Readonly<Record<string, string | boolean | (string | boolean)[] | undefined>>
  readonly positionals: readonly string[]
}

/** Splits `argv` into the command word and the rest; `--dir X` may come before the command. */
export function splitCommand(argv: readonly string[]): { command: string | undefined; rest: string[] } {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === '--dir') {
      i++
      continue
    }
    if (!arg.startsWith('-')) return { command: arg, rest: [...argv.slice(0, i), ...argv.slice(i + 1)] }
    if (arg === '--') return { command: undefined, rest: [...argv] }
  }
  return { command: undefined, rest: [...argv] }
}

/** Parses the arguments of `command` strictly: an unknown flag or a missing value is a UsageError (naming the flag meant, when one is close). */
export function parseCommandArgs(command: string, args: readonly string[], options: OptionDefs): ParsedArgs {
  try {
    const { values, positionals } = parseArgv(args, options, { allowPositionals: true })
    return { values, positionals }
  } catch (err) {
    if (!(err instanceof ArgvError)) throw err
    const help = `see "pxe-pki ${command} --help"`
    const flag = err.argument
    if (err.problem === 'unknown_option') throw new UsageError(`unknown option ${flag} for "${command}"${err.near === null ? '' : ` (did you mean ${err.near}?)`}; ${help}`)
    if (err.problem === 'needs_value') throw new UsageError(`option ${flag} of "${command}" needs a value; ${help}`)
    if (err.problem === 'takes_no_value') throw new UsageError(`option ${flag} of "${command}" takes no value; ${help}`)
    throw new UsageError(`unexpected argument "${flag}" for "${command}"; ${help}`)
  }
}

/** A string flag's value (the last one when repeated). */
export function stringFlag(parsed: ParsedArgs, name: string): string | undefined {
  const value = parsed.values[name]
  if (Array.isArray(value)) return value.length === 0 ? undefined : String(value[value.length - 1])
  return typeof value === 'string' ? value : undefined
}

/** A repeatable, comma-separated list flag (`--dns a,b --dns c`). */
export function listFlag(parsed: ParsedArgs, name: string): string[] {
  const value = parsed.values[name]
  const all = Array.isArray(value) ? value : value === undefined ? [] : [value]
  return all.flatMap((v) => String(v).split(',')).map((v) => v.trim()).filter((v) => v.length > 0)
}

/** Requires between `min` and `max` positionals, described by `what` for the error. */
export function expectPositionals(command: string, parsed: ParsedArgs, min: number, max: number, what: string): void {
  const n = parsed.positionals.length
  if (n < min) throw new UsageError(`"${command}" needs ${what}; see "pxe-pki ${command} --help"`)
  if (n > max) throw new UsageError(`unexpected argument "${printable(parsed.positionals[max] ?? '')}" for "${command}"; see "pxe-pki ${command} --help"`)
}
