/** The help texts: the top level (commands, context lookup, exit statuses) and one per command. */
import { GLOBAL_FLAGS } from './args.js'
import type { CommandSpec, FlagSpec } from './command.js'
import { COMMANDS } from './commands/index.js'

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

const EXIT_TEXT = `exit status: 0 success; 1 the operation failed (the controller's error code and message are printed,
or why no controller answered) or pxe-ctl refused it before asking (e.g. a drain that would leave shards
without a node, without --force); 2 usage error (unknown command or flag, missing argument, bad number).`

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
    `  ${'help COMMAND'.padEnd(width)}  the help of one command (also: pxe-ctl COMMAND --help)`,
    '',
    'global flags (any command, anywhere on the line):',
    ...flagLines(GLOBAL_FLAGS),
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
    EXIT_TEXT,
  ].join('\n')
}
