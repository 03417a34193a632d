/** The `pxe-pki` command line: dispatch, help and the one-line error contract (exit 2 usage, 1 other). */
import { didYouMean } from '../src/cli-kit/did-you-mean.js'
import { packageVersion } from '../src/cli-kit/version.js'
import { splitCommand, parseCommandArgs } from './args.js'
import type { OptionDefs } from './args.js'
import { COMMANDS, GROUPS, optionDefs } from './commands.js'
import type { Command, CommandGroup, FlagSpec } from './commands.js'
import { DEFAULT_PKI_DIR } from './layout.js'
import { PkiError, UsageError } from './errors.js'
import { printable } from './serial.js'

/** Where the CLI writes; the real process streams, or buffers in tests. */
export interface CliIo {
  readonly out: (text: string) => void
  readonly err: (text: string) => void
}

/** The flags with a one-letter form, as the help shows it. */
const SHORT: Readonly<Record<string, string>> = { help: '-h, ', version: '-V, ' }

const DIR_FLAG: FlagSpec = { type: 'string', value: 'DIR', help: `the PKI directory (default ${DEFAULT_PKI_DIR})` }
const HELP_FLAG: FlagSpec = { type: 'boolean', help: 'show this help' }
const VERSION_FLAG: FlagSpec = { type: 'boolean', help: "print pxe-pki's version and exit (also: pxe-pki version)" }
const COMMON_FLAGS = flagLines({ dir: DIR_FLAG, help: HELP_FLAG, version: VERSION_FLAG })

/** One aligned line per flag: `--name VALUE  what it does`. */
function flagLines(flags: Readonly<Record<string, FlagSpec>>): string {
  const left = Object.entries(flags).map(([name, spec]) => `${SHORT[name] ?? ''}--${name}${spec.value === undefined ? '' : ` ${spec.value}`}`)
  const width = Math.max(...left.map((l) => l.length))
  return Object.values(flags).map((spec, i) => `  ${left[i]!.padEnd(width)}  ${spec.help}`).join('\n')
}

function mainHelp(): string {
  const entries: [string, string][] = [
    ...Object.entries(COMMANDS).map(([name, c]): [string, string] => [name, c.summary]),
    ...Object.entries(GROUPS).map(([name, g]): [string, string] => [`${name} ${Object.keys(g.commands).join('|')}`, g.summary]),
  ]
  const width = Math.max(...entries.map(([name]) => name.length))
  const lines = entries.map(([name, summary]) => `  ${name.padEnd(width)}  ${summary}`)
  return [
    'usage: pxe-pki <command> [options]   (npm run pki -- <command> [options])',
    '',
    'Operator PKI of the Discord-PXE controller: CA, node, operator and signer certificates, CRL, plan keys,',
    'and device enrollment (bootstrap tokens, the signer, manual approval).',
    '',
    'commands:',
    ...lines,
    '',
    'options:',
    COMMON_FLAGS,
    '',
    'Run "pxe-pki <command> --help" (or "pxe-pki help <command>") for the options of one command.',
    '',
    EXIT_TEXT,
  ].join('\n')
}

const EXIT_TEXT = `exit status: 0 success (also when the reader of a pipe stops reading: pxe-pki list | head); 1 the
operation was refused or failed (the reason on stderr, one line); 2 usage error (unknown command or option,
missing or bad argument).`

function groupHelp(name: string, group: CommandGroup): string {
  const width = Math.max(...Object.keys(group.commands).map((n) => n.length + name.length + 1))
  const lines = Object.entries(group.commands).map(([sub, c]) => `  ${`${name} ${sub}`.padEnd(width)}  ${c.summary}`)
  return [`usage: pxe-pki ${name} <${Object.keys(group.commands).join('|')}> [options]`, '', `${group.summary}.`, '', group.details, '', 'commands:', ...lines, '', 'options:', flagLines({ dir: DIR_FLAG, help: HELP_FLAG }), '', `Run "pxe-pki ${name} <command> --help" for the options of one command.`, '', EXIT_TEXT].join('\n')
}

function commandHelp(name: string, command: Command): string {
  const flags = flagLines({ ...command.options, ...(command.usesDir ? { dir: DIR_FLAG } : {}), help: HELP_FLAG })
  return [`usage: pxe-pki ${command.usage}${command.usesDir ? ' [--dir DIR]' : ''}`, '', `${command.summary}.`, '', command.details, '', 'options:', flags, '', EXIT_TEXT].join('\n')
}

/** ` (did you mean "issue"?)` when a command name is close to `name`, else ''. */
function nearCommand(name: string, among: readonly string[] = [...Object.keys(COMMANDS), ...Object.keys(GROUPS), 'help', 'version']): string {
  const near = didYouMean(name, among)
  return near === null ? '' : ` (did you mean "${near}"?)`
}

const wantsHelp = (args: readonly string[]) => args.includes('--help') || args.includes('-h')

/** Help for `help <group> [<command>]` and `<group> help [<command>]`. */
function groupTopicHelp(name: string, group: CommandGroup, topic: string | undefined): string {
  if (topic === undefined) return groupHelp(name, group)
  const command = Object.hasOwn(group.commands, topic) ? group.commands[topic] : undefined
  if (command === undefined) throw new UsageError(`no command "${name} ${printable(topic)}"${nearCommand(topic, Object.keys(group.commands))}; run "pxe-pki ${name} --help" for the list`)
  return commandHelp(`${name} ${topic}`, command)
}

/** Runs `pxe-pki <group> <command> ...`. */
async function runGroup(name: string, group: CommandGroup, rest: readonly string[], io: CliIo): Promise<number> {
  const { command: sub, rest: subRest } = splitCommand(rest)
  if (sub === undefined) {
    if (wantsHelp(subRest)) return (io.out(groupHelp(name, group)), 0)
    throw new UsageError(`"${name}" needs a command: ${Object.keys(group.commands).join(', ')}; run "pxe-pki ${name} --help"`)
  }
  if (sub === 'help') return (io.out(groupTopicHelp(name, group, subRest.find((a) => !a.startsWith('-')))), 0)
  const command = Object.hasOwn(group.commands, sub) ? group.commands[sub] : undefined
  if (command === undefined) throw new UsageError(`unknown command "${name} ${printable(sub)}"${nearCommand(sub, Object.keys(group.commands))}; run "pxe-pki ${name} --help" for the list`)
  return runCommand(`${name} ${sub}`, command, subRest, io)
}

/** Parses the flags of `command` and runs it (or prints its help). */
async function runCommand(name: string, command: Command, rest: readonly string[], io: CliIo): Promise<number> {
  const options: OptionDefs = { ...optionDefs(command.options), help: { type: 'boolean', short: 'h' } }
  if (command.usesDir) options.dir = { type: 'string' }
  const args = parseCommandArgs(name, rest, options)
  if (args.values.help === true) return (io.out(commandHelp(name, command)), 0)
  const dir = typeof args.values.dir === 'string' ? args.values.dir : DEFAULT_PKI_DIR
  if (dir.length === 0) throw new UsageError('--dir needs a non-empty path')
  await command.run(args, { dir, print: io.out, notice: io.err })
  return 0
}

const isVersionFlag = (arg: string) => arg === '--version' || arg === '-V'

/** Runs one CLI invocation and returns its exit code; never throws. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  try {
    const { command: name, rest } = splitCommand(argv)
    if (name === 'version' || (name === undefined && rest.some(isVersionFlag))) {
      // --dir (which may come before any command) means nothing here; anything else is a mistake.
      const extra = rest.find((a, i) => !isVersionFlag(a) && a !== '--dir' && rest[i - 1] !== '--dir')
      if (extra !== undefined) throw new UsageError(`"version" takes no argument (got "${printable(extra)}")`)
      return (io.out(`pxe-pki ${packageVersion()}`), 0)
    }
    if (name === undefined || name === 'help') {
      const words = name === 'help' ? rest.filter((a) => !a.startsWith('-')) : []
      const topic = words[0]
      if (topic !== undefined && Object.hasOwn(GROUPS, topic)) return (io.out(groupTopicHelp(topic, GROUPS[topic]!, words[1])), 0)
      const known = topic === undefined || !Object.hasOwn(COMMANDS, topic) ? undefined : COMMANDS[topic]
      if (known !== undefined && topic !== undefined) return (io.out(commandHelp(topic, known)), 0)
      if (topic !== undefined) throw new UsageError(`no command "${printable(topic)}"${nearCommand(topic)}; run "pxe-pki --help" for the list`)
      if (name === 'help' || wantsHelp(rest)) return (io.out(mainHelp()), 0)
      throw new UsageError('missing command; run "pxe-pki --help" for the list')
    }
    if (Object.hasOwn(GROUPS, name)) return await runGroup(name, GROUPS[name]!, rest, io)
    const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined
    if (command === undefined) throw new UsageError(`unknown command "${printable(name)}"${nearCommand(name)}; run "pxe-pki --help" for the list`)
    return await runCommand(name, command, rest, io)
  } catch (err) {
    const code = err instanceof PkiError ? err.exitCode : 1
    const message = err instanceof Error ? err.message : String(err)
    // One line, no stack: operators read this, scripts grep it.
    io.err(`pxe-pki: error: ${message.replace(/\s*\n\s*/g, ' ')}`)
    return code
  }
}
