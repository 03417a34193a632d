/**
 * One V8 setting for the controller's process, applied as it starts (main.ts), before any connection.
 *
 * Every TLS connection holds memory outside V8's heap (OpenSSL's state and buffers) that Node reports
 * to V8 as external memory. By default V8 keeps a limit of its own for external memory and starts a
 * full (mark-compact) collection each time that memory grew by a fixed step, however small the
 * JavaScript heap is. A reconnect storm opens thousands of connections in seconds, so the controller
 * ran a full collection every few hundred connections: in a 10,000-node restart 22 of them in 20 s
 * with a heap of 30–130 MB, each marking the whole heap (on the main thread and on V8's helper
 * threads). With `--external-memory-accounted-in-global-limit` external memory counts toward V8's
 * global limit instead, which grows with the heap: the same storm of 6,000 resumed connections ran
 * 2–4 full collections instead of 14–21, and the server used 8–12 % less CPU (all threads; README
 * "Measured figures"). Memory stays bounded: the external memory still counts, and the connection
 * caps bound the connections that hold it.
 *
 * Applied only on the V8 it was measured on (13.x: Node 24 LTS, the production target). V8 prints an
 * error line for a flag it does not know (Node 20's V8 11.3 has none of it), and a later V8 may make it
 * the default or drop it. An operator who set the flag either way on the command line or in
 * NODE_OPTIONS keeps their choice.
 */
import v8 from 'node:v8'

export const EXTERNAL_MEMORY_FLAG = '--external-memory-accounted-in-global-limit'
const FLAG_NAME = 'external-memory-accounted-in-global-limit'

/** What the decision reads (the running process's by default). */
export interface GcTuningInput {
  /** process.versions.v8 */
  readonly v8Version: string
  /** process.execArgv */
  readonly execArgv: readonly string[]
  /** process.env.NODE_OPTIONS */
  readonly nodeOptions: string | undefined
}

export type GcTuningOutcome = { readonly applied: true; readonly flag: string } | { readonly applied: false; readonly reason: string }

/** Whether to set the flag, and why not (pure). */
export function decideGcTuning(input: GcTuningInput): GcTuningOutcome {
  const major = Number.parseInt(input.v8Version, 10)
  if (major !== 13) return { applied: false, reason: `V8 ${input.v8Version}: only V8 13 (Node 24) is tuned` }
  // Either spelling (dashes or underscores), with or without "no-": the operator decided.
  const mentions = (arg: string) => arg.replaceAll('_', '-').includes(FLAG_NAME)
  if (input.execArgv.some(mentions) || (input.nodeOptions ?? '').split(/\s+/).some(mentions)) return { applied: false, reason: 'set by the operator' }
  return { applied: true, flag: EXTERNAL_MEMORY_FLAG }
}

/** Applies the decision to this process (`setFlags` is v8.setFlagsFromString; injectable for tests). */
export function tuneGarbageCollection(
  input: GcTuningInput = { v8Version: process.versions.v8, execArgv: process.execArgv, nodeOptions: process.env.NODE_OPTIONS },
  setFlags: (flags: string) => void = (flags) => v8.setFlagsFromString(flags),
): GcTuningOutcome {
  const outcome = decideGcTuning(input)
  if (outcome.applied) setFlags(outcome.flag)
  return outcome
}
