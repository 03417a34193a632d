/**
 * One V8 setting for the controller's process, applied as it starts (main.ts), before any connection.
 *
 * Every TLS connection holds memory outside V8's heap (OpenSSL's state and buffers) that Node reports
 * to V8. By default V8 keeps a limit of its own for that external memory and starts a full
 * (mark-compact) collection each time it grew by a fixed step, however small the JavaScript heap is.
 * A reconnect storm opens thousands of connections in seconds, so the controller ran a full collection
 * every few hundred connections, each marking the whole heap on the main thread and V8's helper
 * threads. With `--external-memory-accounted-in-global-limit` that memory counts toward V8's global
 * limit instead, which grows with the heap: far fewer full collections in a storm (docs/limits.md,
 * garbage collection in a storm, and "Measured figures").
 *
 * Applied only on the V8 it was measured on (13.x: Node 24 LTS, the production target): V8 prints an
 * error line for a flag it does not know (Node 20's V8 11.3 has none of it), and a later V8 may make it
 * the default or drop it. Setting it at run time is sound for this flag: V8 reads it at every use (the
 * limits are computed afresh at each collection), and it is set before the first connection. An
 * operator who gave the flag either way on node's command line keeps their choice (Node refuses it in
 * NODE_OPTIONS, which allows only a few V8 flags, so the command line is the only place).
 */
import v8 from 'node:v8'

const FLAG_NAME = 'external-memory-accounted-in-global-limit'
/** The V8 flag this module sets. */
export const EXTERNAL_MEMORY_FLAG = `--${FLAG_NAME}`

/** What the decision reads (the running process's by default). */
export interface GcTuningInput {
  /** process.versions.v8 */
  readonly v8Version: string
  /** process.execArgv: node's own command-line flags */
  readonly execArgv: readonly string[]
}

/**
 * What became of the setting: set here, set by the operator on node's command line (their argument,
 * either way), or left at V8's default, with the reason.
 */
export type GcTuningOutcome =
  | { readonly applied: true; readonly flag: string }
  | { readonly applied: false; readonly operatorArg: string }
  | { readonly applied: false; readonly operatorArg: null; readonly reason: string }

/** Whether to set the flag, and why not (pure). */
export function decideGcTuning(input: GcTuningInput): GcTuningOutcome {
  // Either spelling (dashes or underscores), with or without "no": the operator decided.
  const operatorArg = input.execArgv.find((arg) => arg.replaceAll('_', '-').includes(FLAG_NAME))
  if (operatorArg !== undefined) return { applied: false, operatorArg }
  const major = Number.parseInt(input.v8Version, 10)
  if (major !== 13) return { applied: false, operatorArg: null, reason: `V8 ${input.v8Version}: only V8 13 (Node 24) is tuned` }
  return { applied: true, flag: EXTERNAL_MEMORY_FLAG }
}

/** Applies the decision to this process (`setFlags` is v8.setFlagsFromString; injectable for tests). */
export function tuneGarbageCollection(
  input: GcTuningInput = { v8Version: process.versions.v8, execArgv: process.execArgv },
  setFlags: (flags: string) => void = (flags) => v8.setFlagsFromString(flags),
): GcTuningOutcome {
  const outcome = decideGcTuning(input)
  if (outcome.applied) setFlags(outcome.flag)
  return outcome
}

/** The start's log line for an outcome: what V8 runs with, and who decided. */
export function gcTuningLogEntry(outcome: GcTuningOutcome): { readonly fields: Record<string, string | null>; readonly message: string } {
  if (outcome.applied) return { fields: { v8Flag: outcome.flag, setBy: 'controller' }, message: 'V8 tuned for connection storms' }
  if (outcome.operatorArg !== null) return { fields: { v8Flag: outcome.operatorArg, setBy: 'operator' }, message: "V8's external-memory accounting as the operator set it" }
  return { fields: { v8Flag: null, reason: outcome.reason }, message: 'V8 left at its defaults' }
}
