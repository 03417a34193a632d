/** The command line: global flags, one command's flags, and the checks of their values (usage errors, exit 2). */
import { ArgvError, parseArgv, repeatedFlag, type FlagDef } from '../cli-kit/argv.js'
import { nameProblem } from '../core/names.js'
import type { CommandSpec, FlagSpec, GlobalOptions, OutputFormat, Parsed } from './command.js'
import { UsageError, shown } from './errors.js'

const DEFAULT_REQUEST_TIMEOUT_S = 10

/** The flags every command takes (listed in every command's help). */
export const GLOBAL_FLAGS: readonly FlagSpec[] = [
  { name: 'context', value: 'FILE', help: 'the context file (default: $PXE_CONTEXT, else ~/.config/pxe-ctl/context.json)' },
  { name: 'output', short: 'o', value: 'FORMAT', choices: ['table', 'json'], help: 'table (default: aligned columns for people) or json (the controller\'s JSON, for scripts)' },
  { name: 'verbose', short: 'v', help: 'say on stderr which controller answered each request, and why others were skipped' },
  { name: 'request-timeout', value: 'S', help: `seconds one request may take before the next controller is tried (default ${DEFAULT_REQUEST_TIMEOUT_S})` },
  { name: 'help', short: 'h', help: 'show the help of the command' },
]

/** Global flags that take a value: the command word is the first argument that is neither a flag nor one of their values. */
export const GLOBAL_VALUE_FLAGS: ReadonlySet<string> = new Set(GLOBAL_FLAGS.filter((f) => f.value !== undefined).flatMap((f) => [`--${f.name}`, ...(f.short ? [`-${f.short}`] : [])]))

/** Splits argv into the command's words (one, or two for a group such as `context init`) and the rest. */
export function splitCommand(argv: readonly string[], groups: ReadonlySet<string>): { words: string[]; rest: string[] } {
  const words: string[] = []
  const rest: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === '--') {
      rest.push(...argv.slice(i))
      break
    }
    const takesWord = words.length === 0 || (words.length === 1 && groups.has(words[0]!))
    if (!arg.startsWith('-') && takesWord) {
      words.push(arg)
      continue
    }
    rest.push(arg)
    if (GLOBAL_VALUE_FLAGS.has(arg) && i + 1 < argv.length) rest.push(argv[++i]!)
  }
  return { words, rest }
}

/** The flags as the parser takes them: a placeholder means a value. */
export function flagDefs(flags: readonly FlagSpec[]): Record<string, FlagDef> {
  const out: Record<string, FlagDef> = {}
  for (const f of flags) out[f.name] = { type: f.value === undefined ? 'boolean' : 'string', ...(f.short ? { short: f.short } : {}) }
  return out
}

/** Parses the rest of the command line of `command`; throws UsageError naming the problem (and the flag meant, when one is close). */
export function parseCommandLine(command: CommandSpec, rest: readonly string[]): Parsed {
  let parsed
  try {
    parsed = parseArgv(rest, flagDefs([...command.flags, ...GLOBAL_FLAGS]), { allowPositionals: true })
  } catch (err) {
    if (err instanceof ArgvError) throw new UsageError(err.message, command.words)
    throw err
  }
  const twice = repeatedFlag(parsed.options)
  if (twice !== null) throw new UsageError(`--${twice} is given more than once`, command.words)
  const values = parsed.values as Record<string, string | boolean | undefined>
  if (values.help === true) return { positionals: parsed.positionals, flags: values, global: globalOptions({}, command) }
  const { positionals } = parsed
  if (positionals.length > command.args.length) throw new UsageError(`unexpected argument ${shown(positionals[command.args.length]!)}`, command.words)
  if (positionals.length < command.args.length) throw new UsageError(`missing ${command.args[positionals.length]}`, command.words)
  return { positionals, flags: values, global: globalOptions(values, command) }
}

function globalOptions(values: Record<string, string | boolean | undefined>, command: CommandSpec): GlobalOptions {
  const output = (values.output as string | undefined) ?? 'table'
  if (output !== 'table' && output !== 'json') throw new UsageError(`-o must be table or json (got ${shown(output)})`, command.words)
  const context = values.context as string | undefined
  if (context === '') throw new UsageError('--context needs a file path', command.words)
  const timeout = values['request-timeout'] as string | undefined
  return {
    context: context ?? null,
    output: output as OutputFormat,
    verbose: values.verbose === true,
    requestTimeoutMs: timeout === undefined ? DEFAULT_REQUEST_TIMEOUT_S * 1000 : Math.round(seconds('--request-timeout', timeout, 0.1, 600, command.words) * 1000),
  }
}

/** A number of seconds in min..max (decimals allowed: 0.5); throws UsageError. */
export function seconds(flag: string, value: string, min: number, max: number, command: string): number {
  const n = /^\d{1,6}(\.\d{1,3})?$/.test(value) ? Number(value) : NaN
  if (!(n >= min && n <= max)) throw new UsageError(`${flag} must be a number of seconds in ${min}..${max} (got ${shown(value, 32)})`, command)
  return n
}

/** An integer in min..max; throws UsageError. */
export function integer(what: string, value: string, min: number, max: number, command: string): number {
  const n = /^\d{1,9}$/.test(value) ? Number(value) : NaN
  if (!(n >= min && n <= max)) throw new UsageError(`${what} must be an integer in ${min}..${max} (got ${shown(value, 32)})`, command)
  return n
}

/** A node name (the SPEC's name rule); throws UsageError. */
export function nodeName(value: string, command: string): string {
  const problem = nameProblem(value)
  if (problem !== null) throw new UsageError(`NODE ${shown(value)} ${problem}`, command)
  return value
}

/** A flag's string value, or undefined. */
export function stringFlag(parsed: Parsed, name: string): string | undefined {
  const v = parsed.flags[name]
  return typeof v === 'string' ? v : undefined
}

/** Whether a boolean flag was given. */
export function boolFlag(parsed: Parsed, name: string): boolean {
  return parsed.flags[name] === true
}
