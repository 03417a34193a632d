/** The help texts: the top level (commands, context lookup, exit statuses) and one per command. */
import { GLOBAL_FLAGS } from './args.js'
import type { CommandSpec, FlagSpec } from './command.js'
import { COMMANDS, groupCommands } from './commands/index.js'

function flagLines(flags: readonly FlagSpec[]): string[] {
  const label = (f: FlagSpec) => `${f.short ? `-${f.short}, ` : '    '}--${f.name}${f.value ? ` ${f.value}` : ''}`
  const width = Math.max(...flags.map((f) => label(f).length))
  return flags.map((f) => `  ${label(f).padEnd(width)}  ${f.help}`)
}

/** `usage: pxe-ctl drain NODE [...]` and the flags (what a usage error prints). */
export function usageOf(c: CommandSpec): string {
  const lines = [`usage: pxe-ctl ${c.words}${c.usage ? ` ${c.usage}` : ''} [global flags]`]
  if (c.flags.length > 0) lines.push('', 'flags:', ...flagLines(c.flags))
  return lines.join('\n')
}

/** The whole help of one command. */
export function commandHelp(c: CommandSpec): string {
  const [usage, ...flags] = usageOf(c).split('\n')
  return [usage, '', `${c.summary[0]!.toUpperCase()}${c.summary.slice(1)}.`, '', c.details, ...flags, '', 'global flags:', ...flagLines(GLOBAL_FLAGS), '', EXIT_TEXT].join('\n')
}

const EXIT_TEXT = `exit status: 0 success (also when the reader of a pipe stops reading: pxe-ctl watch | head); 1 the
operation failed (the controller's error code and message are printed, or why no controller answered) or
pxe-ctl refused it before asking (e.g. a drain that would leave shards without a node, without --force);
2 usage error (unknown command or flag, missing argument, bad number).`

/** The help of a group of commands (`pxe-ctl context --help`): its commands and how to get each one's help. */
export function groupHelp(group: string): string {
  const commands = groupCommands(group)
  const width = Math.max(...commands.map((c) => c.words.length))
  return [
    `usage: pxe-ctl ${group} COMMAND [ARGS] [flags]`,
    '',
    'commands:',
    ...commands.map((c) => `  ${c.words.padEnd(width)}  ${c.summary}`),
    '',
    ...commands.map((c) => `  ${usageOf(c).split('\n')[0]!.replace(/^usage: /, '')}`),
    '',
    `Run "pxe-ctl ${group} COMMAND --help" for the flags of one command.`,
    '',
    'global flags:',
    ...flagLines(GLOBAL_FLAGS),
    '',
    EXIT_TEXT,
  ].join('\n')
}

/** Only before a command (`pxe-ctl --version`); listed with the global flags of the top-level help. */
const VERSION_FLAG: FlagSpec = { name: 'version', short: 'V', help: "print pxe-ctl's version and exit (as pxe-ctl version)" }

/** The top-level help. */
export function mainHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.words.length))
  return [
    'usage: pxe-ctl [global flags] COMMAND [ARGS] [flags]',
    '',
    'The operator\'s client of the Discord-PXE controller, over mutual TLS with an operator bundle: the',
    'fleet\'s status, nodes, drains, guild routes, reshards and CRL pushes.',
    '',
    'commands:',
    ...COMMANDS.map((c) => `  ${c.words.padEnd(width)}  ${c.summary}`),
    `  ${'help COMMAND'.padEnd(width)}  the help of one command or group (also: pxe-ctl COMMAND --help)`,
    '',
    'global flags (any command, anywhere on the line):',
    ...flagLines([...GLOBAL_FLAGS, VERSION_FLAG]),
    '',
    'context: the context file is looked up in this order:',
    '  1. --context FILE',
    '  2. $PXE_CONTEXT',
    '  3. ~/.config/pxe-ctl/context.json',
    'It holds {"controllers": ["https://10.0.0.5:8443", "https://10.0.0.6:8443"], "bundle": "/etc/pxe-ctl/alice"},',
    'must be mode 0600, and is written by "pxe-ctl context init". The bundle is an operator bundle folder',
    '("pxe-pki issue NAME --role operator": key.pem, cert.pem, ca.pem; a relative path is relative to the',
    'context file\'s folder). Only the bundle\'s ca.pem is trusted for the controllers. The controllers are',
    'asked in order: a connection error, a timeout or a 503 (not_leader from an HA follower) moves on to',
    'the next; -v says which one answered.',
    '',
    'output: aligned tables by default (no colour); -o json prints the controller\'s JSON, or the',
    'command\'s result object, for scripts. Warnings and progress go to stderr.',
    '',
    'shell completion: source <(pxe-ctl completion bash), or zsh (pxe-ctl completion --help).',
    '',
    EXIT_TEXT,
  ].join('\n')
}
