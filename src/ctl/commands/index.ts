/** Every pxe-ctl command, in the order the help lists them. */
import type { CommandSpec } from '../command.js'
import { completionCommand } from './completion.js'
import { contextInit } from './context-init.js'
import { crlPush } from './crl-push.js'
import { drain, undrain } from './drain.js'
import { enrollList } from './enroll.js'
import { reshard } from './reshard.js'
import { route } from './route.js'
import { nodes, status } from './status.js'
import { version } from './version.js'
import { watch } from './watch.js'

export const COMMANDS: readonly CommandSpec[] = [contextInit, status, nodes, drain, undrain, route, reshard, watch, crlPush, enrollList, completionCommand(() => COMMANDS), version]

/** First words that need a second one (`context init`, `crl push`). */
export const GROUPS: ReadonlySet<string> = new Set(COMMANDS.filter((c) => c.words.includes(' ')).map((c) => c.words.split(' ')[0]!))

/** The second words of a group (`context` → init). */
export function groupCommands(group: string): CommandSpec[] {
  return COMMANDS.filter((c) => c.words.startsWith(`${group} `))
}

/** The words a command line may begin with: each command's first word once, in the table's order, then help. */
export function firstWords(): string[] {
  return [...new Set(COMMANDS.map((c) => c.words.split(' ')[0]!)), 'help']
}

/** The command called by `words`, or undefined. */
export function findCommand(words: string): CommandSpec | undefined {
  return COMMANDS.find((c) => c.words === words)
}
