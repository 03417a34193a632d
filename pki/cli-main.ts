/** The `pxe-pki` command line: dispatch, help and the one-line error contract (exit 2 usage, 1 other). */
import { splitCommand, parseCommandArgs } from './args.js'
import type { OptionDefs } from './args.js'
import { COMMANDS, optionDefs } from './commands.js'
import type { Command, FlagSpec } from './commands.js'
import { DEFAULT_PKI_DIR } from './layout.js'
import { PkiError, UsageError } from './errors.js'
import { printable } from './serial.js'

/** Where the CLI writes; the real process streams, or buffers in tests. */
export interface CliIo {
  readonly out: (text: string) => void
  readonly err: (text: string) => void
}

const DIR_FLAG: FlagSpec = { type: 'string', value: 'DIR', help: `the PKI directory (default ${DEFAULT_PKI_DIR})` }
const HELP_FLAG: FlagSpec = { type: 'boolean', help: 'show this help' }
const COMMON_FLAGS = flagLines({ dir: DIR_FLAG, help: HELP_FLAG })

/** One aligned line per flag: `--name VALUE  what it does`. */
function flagLines(flags: Readonly<Record<string, FlagSpec>>): string {
  const left = Object.entries(flags).map(([name, spec]) => `${name === 'help' ? '-h, ' : ''}--${name}${spec.value === undefined ? '' : ` ${spec.value}`}`)
  const width = Math.max(...left.map((l) => l.length))
  return Object.values(flags).map((spec, i) => `  ${left[i]!.padEnd(width)}  ${spec.help}`).join('\n')
}

function mainHelp(): string {
  const width = Math.max(...Object.values(COMMANDS).map((c) => c.usage.split(' ')[0]!.length))
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`)
  return [
    'usage: pxe-pki <command> [options]   (npm run pki -- <command> [options])',
    '',
    'Operator PKI of the Discord-PXE controller: CA, node and operator certificates, CRL, plan keys.',
    '',
    'commands:',
    ...lines,
    '',
    'options:',
    COMMON_FLAGS,
    '',
    'Run "pxe-pki <command> --help" for the options of one command.',
  ].join('\n')
}

function commandHelp(name: string, command: Command): string {
  const flags = flagLines({ ...command.options, ...(command.usesDir ? { dir: DIR_FLAG } : {}), help: HELP_FLAG })
  return [`usage: pxe-pki ${command.usage}${command.usesDir ? ' [--dir DIR]' : ''}`, '', `${command.summary}.`, '', command.details, '', 'options:', flags].join('\n')
}

/** Runs one CLI invocation and returns its exit code; never throws. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  try {
    const { command: name, rest } = splitCommand(argv)
    if (name === undefined || name === 'help') {
      const topic = name === 'help' ? rest.find((a) => !a.startsWith('-')) : undefined
      const known = topic === undefined ? undefined : COMMANDS[topic]
      if (known !== undefined && topic !== undefined) return (io.out(commandHelp(topic, known)), 0)
      if (name === 'help' || rest.includes('--help') || rest.includes('-h')) return (io.out(mainHelp()), 0)
      throw new UsageError('missing command; run "pxe-pki --help" for the list')
    }
    const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined
    if (command === undefined) throw new UsageError(`unknown command "${printable(name)}"; run "pxe-pki --help" for the list`)
    const options: OptionDefs = { ...optionDefs(command.options), help: { type: 'boolean', short: 'h' } }
    if (command.usesDir) options.dir = { type: 'string' }
    const args = parseCommandArgs(name, rest, options)
    if (args.values.help === true) return (io.out(commandHelp(name, command)), 0)
    const dir = typeof args.values.dir === 'string' ? args.values.dir : DEFAULT_PKI_DIR
    if (dir.length === 0) throw new UsageError('--dir needs a non-empty path')
    await command.run(args, { dir, print: io.out, notice: io.err })
    return 0
  } catch (err) {
    const code = err instanceof PkiError ? err.exitCode : 1
    const message = err instanceof Error ? err.message : String(err)
    // One line, no stack: operators read this, scripts grep it.
    io.err(`pxe-pki: error: ${message.replace(/\s*\n\s*/g, ' ')}`)
    return code
  }
}
