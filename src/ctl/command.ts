/** What a pxe-ctl command is: its words, usage, flags (with their help) and what it runs. */
import type { ControllerApi } from './api.js'
import type { Io } from './io.js'

/** One flag of a command (or a global one). `value` is its placeholder; none means a boolean switch. */
export interface FlagSpec {
  readonly name: string
  readonly short?: string
  readonly value?: string
  /** The only values it takes, when they are a fixed few (shell completion offers them). */
  readonly choices?: readonly string[]
  readonly help: string
}

/** The output format: aligned tables for people, the controller's JSON (or the result object) for scripts. */
export type OutputFormat = 'table' | 'json'

/** The flags every command takes. */
export interface GlobalOptions {
  readonly context: string | null
  readonly output: OutputFormat
  readonly verbose: boolean
  readonly requestTimeoutMs: number
}

/** A parsed command line of one command. */
export interface Parsed {
  readonly positionals: readonly string[]
  readonly flags: Readonly<Record<string, string | boolean | undefined>>
  readonly global: GlobalOptions
}

/** What a running command can use. */
export interface RunContext {
  readonly io: Io
  readonly global: GlobalOptions
  /** The environment the context file is looked up in ($PXE_CONTEXT, $HOME): the process's, or a test's. */
  readonly env: NodeJS.ProcessEnv
  /** The API of the context's controllers (the context file is read at the first call). */
  readonly api: () => Promise<ControllerApi>
  /** Resolves after `ms`, or early (false) when the user interrupts (SIGINT / SIGTERM). */
  readonly sleep: (ms: number) => Promise<boolean>
  /** True once the user interrupted. */
  readonly interrupted: () => boolean
  /** From now on SIGINT / SIGTERM only mark the run interrupted (commands that wait call it first). */
  readonly trapInterrupts: () => void
  readonly now: () => number
}

/** One command: `words` is how it is called (`drain`, `context init`). */
export interface CommandSpec {
  readonly words: string
  /** The arguments after the words, e.g. `NODE [--dry-run] [--wait [--timeout S]]`. */
  readonly usage: string
  readonly summary: string
  /** Paragraphs after the summary (what it does, what it prints, examples). */
  readonly details: string
  /** Positional argument names, all required (at most this many). */
  readonly args: readonly string[]
  readonly flags: readonly FlagSpec[]
  run(ctx: RunContext, parsed: Parsed): Promise<void>
}
