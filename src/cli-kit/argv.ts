/**
 * The flags of a command line, parsed by node:util parseArgs in its lenient mode and checked here, so
 * that every problem is said in one line of our own: parseArgs's strict mode throws messages with its
 * boilerplate ("Unknown option '--x'. To specify a positional argument starting with a '-', place it
 * at the end of the command after '--', as in '-- \"--x\"", one quote unbalanced), and cannot say
 * which flag was meant. Problems are reported in the order of the command line, the first one only.
 */
import { parseArgs } from 'node:util'
import { didYouMean } from './did-you-mean.js'

/** One flag as the parser takes it: a string (takes a value) or a boolean switch. */
export interface FlagDef {
  readonly type: 'string' | 'boolean'
  readonly short?: string
  readonly multiple?: boolean
}

/** What is wrong with an argument. */
export type ArgvProblem = 'unknown_option' | 'needs_value' | 'takes_no_value' | 'unexpected_argument'

/**
 * A command line that does not fit its flags. The message names the argument and, when one is close,
 * the flag meant; the fields let a CLI with its own phrasing (pxe-pki) say the same in its words.
 */
export class ArgvError extends Error {
  override readonly name = 'ArgvError'
  constructor(
    message: string,
    readonly problem: ArgvProblem,
    /** The argument as typed (printable): `--dryrun`, `-x`, or the stray positional. */
    readonly argument: string,
    /** The flag meant (`--dry-run`), when an unknown one is close to a known one. */
    readonly near: string | null = null,
  ) {
    super(message)
  }
}

/** One option as it appeared on the command line (`rawName` as typed: -o or --output). */
export interface OptionToken {
  readonly name: string
  readonly rawName: string
  readonly value: string | undefined
}

/** The parsed command line. */
export interface ParsedArgv {
  readonly values: Readonly<Record<string, string | boolean | (string | boolean)[] | undefined>>
  readonly positionals: string[]
  /** The options in command-line order (a caller that refuses a flag given twice counts them). */
  readonly options: readonly OptionToken[]
}

/** A user's argument as a message may show it: printable ASCII, at most `max` characters. */
export function printable(value: string, max = 64): string {
  const clean = value.replace(/[^\x20-\x7e]/g, '?')
  return clean.length > max ? `${clean.slice(0, max)}…` : clean
}

/** A user's argument in a message: printable, in double quotes. */
export function quoted(value: string, max = 64): string {
  return JSON.stringify(printable(value, max))
}

/** Parses `args` against `flags`; throws ArgvError for an unknown flag, a missing or unwanted value, or a stray argument. */
export function parseArgv(args: readonly string[], flags: Readonly<Record<string, FlagDef>>, opts: { readonly allowPositionals: boolean }): ParsedArgv {
  const parsed = parseArgs({ args: [...args], options: { ...flags }, strict: false, allowPositionals: true, tokens: true })
  const options: OptionToken[] = []
  for (const token of parsed.tokens) {
    if (token.kind === 'positional') {
      if (!opts.allowPositionals) throw new ArgvError(`unexpected argument ${quoted(token.value)}`, 'unexpected_argument', printable(token.value))
      continue
    }
    if (token.kind !== 'option') continue
    const def = Object.hasOwn(flags, token.name) ? flags[token.name] : undefined
    const shown = printable(token.rawName)
    if (def === undefined) {
      // A long flag is compared with the long names; a single letter has too few letters to compare.
      const near = token.rawName.startsWith('--') ? didYouMean(token.name, Object.keys(flags)) : null
      throw new ArgvError(`unknown option ${shown}${near === null ? '' : `; did you mean --${near}?`}`, 'unknown_option', shown, near === null ? null : `--${near}`)
    }
    const flag = `--${token.name}`
    if (def.type === 'boolean' && token.value !== undefined) throw new ArgvError(`option ${flag} takes no value (got ${quoted(token.value, 32)})`, 'takes_no_value', flag)
    if (def.type === 'string') {
      if (token.value === undefined) throw new ArgvError(`option ${flag} needs a value`, 'needs_value', flag)
      // `--timeout --wait`: the value was forgotten (parseArgs would take "--wait" as it); a value that
      // really begins with "-" is written --timeout=-x.
      if (!token.inlineValue && token.value.startsWith('-')) {
        throw new ArgvError(`option ${flag} needs a value (got the option ${quoted(token.value, 32)}; write ${flag}=VALUE for a value that begins with "-")`, 'needs_value', flag)
      }
    }
    options.push({ name: token.name, rawName: token.rawName, value: token.value })
  }
  return { values: parsed.values, positionals: parsed.positionals, options }
}

/** The first flag given more than once (by its long name), or null. */
export function repeatedFlag(options: readonly OptionToken[]): string | null {
  const seen = new Set<string>()
  for (const { name } of options) {
    if (seen.has(name)) return name
    seen.add(name)
  }
  return null
}
