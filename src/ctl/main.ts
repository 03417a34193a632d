/** pxe-ctl: dispatch, help, and the exit-status contract (0 success, 1 failed, 2 usage). Never throws. */
import { ControllerApi } from './api.js'
import { parseCommandLine, splitCommand } from './args.js'
import { loadOperatorBundle } from './bundle.js'
import { ControllerClient } from './client.js'
import type { CommandSpec, GlobalOptions, RunContext } from './command.js'
import { suggestion } from '../cli-kit/did-you-mean.js'
import { GROUPS, findCommand, firstWords, groupCommands } from './commands/index.js'
import { contextPath, readContext } from './context-file.js'
import { CtlError, EXIT, UsageError, shown } from './errors.js'
import { commandHelp, groupHelp, mainHelp, usageOf } from './help.js'
import type { Io } from './io.js'

/** What main needs from the process (replaced in tests). */
export interface MainDeps {
  readonly io: Io
  readonly env?: NodeJS.ProcessEnv
  /** Registers the interrupt handler (SIGINT, SIGTERM); returns its removal. */
  readonly onInterrupt?: (handler: () => void) => () => void
}

function processInterrupt(handler: () => void): () => void {
  process.on('SIGINT', handler)
  process.on('SIGTERM', handler)
  return () => {
    process.off('SIGINT', handler)
    process.off('SIGTERM', handler)
  }
}

/** Interruptible sleeps: the handler is registered only by a command that waits, so a plain command keeps Ctrl-C's default. */
function interrupter(onInterrupt: NonNullable<MainDeps['onInterrupt']>) {
  let interrupted = false
  let remove: (() => void) | null = null
  const sleepers = new Set<() => void>()
  // Also ends a request in flight: a Ctrl-C must not wait for a controller that takes its time to answer.
  const abort = new AbortController()
  const fire = () => {
    interrupted = true
    abort.abort()
    for (const wake of sleepers) wake()
  }
  const trap = () => {
    if (remove === null) remove = onInterrupt(fire)
  }
  const sleep = (ms: number) =>
    new Promise<boolean>((resolve) => {
      trap()
      if (interrupted) return resolve(false)
      const wake = () => (clearTimeout(timer), sleepers.delete(wake), resolve(false))
      const timer = setTimeout(() => (sleepers.delete(wake), resolve(true)), ms)
      sleepers.add(wake)
    })
  return { sleep, trap, interrupted: () => interrupted, signal: abort.signal, dispose: () => remove?.() }
}

function apiLoader(global: GlobalOptions, io: Io, env: NodeJS.ProcessEnv, signal: AbortSignal): () => Promise<ControllerApi> {
  let api: Promise<ControllerApi> | null = null
  return () =>
    (api ??= (async () => {
      const context = await readContext(contextPath(global.context, env))
      const bundle = await loadOperatorBundle(context.bundleDir, false)
      const verbose = global.verbose ? (line: string) => io.err(`pxe-ctl: ${line}`) : null
      verbose?.(`context ${context.path}: operator ${bundle.name}, controllers ${context.controllers.join(', ')}`)
      const roleHint = bundle.role === 'operator' ? null : `the bundle ${bundle.dir} holds a ${bundle.role ?? 'role-less'} certificate of ${bundle.name}; pxe-ctl needs an operator bundle ("pxe-pki issue NAME --role operator")`
      return new ControllerApi(new ControllerClient(context.controllers, bundle, global.requestTimeoutMs, verbose, signal), roleHint)
    })())
}

const isHelpFlag = (arg: string) => arg === '--help' || arg === '-h'

/** The help of `topic` (a command's words, or a group's first word), or a usage error naming the command meant. */
function helpOf(topic: readonly string[]): string {
  const words = topic.join(' ')
  const command = findCommand(words)
  if (command !== undefined) return commandHelp(command)
  if (topic.length === 1 && GROUPS.has(words)) return groupHelp(words)
  if (topic.length === 2 && GROUPS.has(topic[0]!)) {
    const subs = groupCommands(topic[0]!).map((c) => c.words.split(' ')[1]!)
    throw new UsageError(`no command "${topic[0]} ${shown(topic[1]!, 32).slice(1, -1)}"${suggestion(topic[1]!, subs, (w) => `"${topic[0]} ${w}"`)}; run "pxe-ctl ${topic[0]} --help" for its commands`)
  }
  throw new UsageError(`no command ${shown(words, 32)}${suggestion(topic[0]!, firstWords())}`)
}

/**
 * The help asked for, or null: `help [CMD...]`, `--help`/`-h` alone, and for a group (which has no
 * command of its own to take the flag) `GROUP --help` and `GROUP help`. A command's own --help is
 * its parser's (a flag like any other, so that `drain --help --dry-run` still helps).
 */
function helpRequest(words: string[], rest: string[]): string | null {
  if (words[0] === 'help') return words.length > 1 || rest.some((a) => !a.startsWith('-')) ? helpOf([...words.slice(1), ...rest.filter((a) => !a.startsWith('-'))].slice(0, 2)) : mainHelp()
  if (words.length === 0 && rest.some(isHelpFlag)) return mainHelp()
  if (words.length === 1 && GROUPS.has(words[0]!) && rest.some(isHelpFlag)) return groupHelp(words[0]!)
  if (words.length === 2 && GROUPS.has(words[0]!) && words[1] === 'help') return groupHelp(words[0]!)
  return null
}

/** `pxe-ctl --version` / `-V` before any command is `pxe-ctl version`. */
function versionAlias(words: string[], rest: string[]): { words: string[]; rest: string[] } {
  const at = rest.findIndex((a) => a === '--version' || a === '-V')
  if (words.length > 0 || at < 0) return { words, rest }
  return { words: ['version'], rest: rest.filter((_, i) => i !== at) }
}

function resolveCommand(words: string[]): CommandSpec {
  if (words.length === 0) throw new UsageError('missing command')
  const command = findCommand(words.join(' '))
  if (command !== undefined) return command
  if (GROUPS.has(words[0]!)) {
    const subs = groupCommands(words[0]!).map((c) => c.words.split(' ')[1]!)
    if (words.length === 1) throw new UsageError(`"${words[0]}" needs one of: ${subs.join(', ')}`)
    const near = suggestion(words[1]!, subs, (w) => `"${words[0]} ${w}"`)
    throw new UsageError(`unknown command "${words[0]} ${shown(words[1]!, 32).slice(1, -1)}"${near || ` (one of: ${subs.join(', ')})`}`)
  }
  throw new UsageError(`unknown command ${shown(words[0]!, 32)}${suggestion(words[0]!, firstWords())}`)
}

/** Runs one pxe-ctl invocation and returns its exit status. */
export async function main(argv: readonly string[], deps: MainDeps): Promise<number> {
  const { io } = deps
  const interrupts = interrupter(deps.onInterrupt ?? processInterrupt)
  try {
    const split = splitCommand(argv, GROUPS)
    const { words, rest } = versionAlias(split.words, split.rest)
    const help = helpRequest(words, rest)
    if (help !== null) return (io.out(help), EXIT.ok)
    const command = resolveCommand(words)
    const parsed = parseCommandLine(command, rest)
    if (parsed.flags.help === true) return (io.out(commandHelp(command)), EXIT.ok)
    const env = deps.env ?? process.env
    const ctx: RunContext = {
      io,
      global: parsed.global,
      env,
      api: apiLoader(parsed.global, io, env, interrupts.signal),
      sleep: interrupts.sleep,
      interrupted: interrupts.interrupted,
      trapInterrupts: interrupts.trap,
      now: Date.now,
    }
    await command.run(ctx, parsed)
    return EXIT.ok
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`pxe-ctl: ${err.message}`)
      const command = err.command === null ? undefined : findCommand(err.command)
      io.err(command === undefined ? 'Run "pxe-ctl --help" for usage.' : `${usageOf(command)}\nRun "pxe-ctl ${command.words} --help" for more.`)
      return EXIT.usage
    }
    if (err instanceof CtlError) {
      io.err(`pxe-ctl: error: ${err.message}`)
      return EXIT.failed
    }
    // A bug: say so in one line, without a stack that could carry paths or key material.
    io.err(`pxe-ctl: internal error: ${err instanceof Error ? `${err.name}: ${err.message.slice(0, 300)}` : String(err)}`)
    return EXIT.failed
  } finally {
    interrupts.dispose()
  }
}
