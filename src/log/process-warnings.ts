/**
 * Process warnings (deprecations, experimental features, MaxListenersExceeded, ...) as JSON log lines.
 * Node prints them to stderr as plain text ("(node:123) [DEP0123] DeprecationWarning: ..."), which a log
 * pipeline that expects one JSON object per line cannot read. The entry points (src/main.ts,
 * src/agent/cli.ts) call `captureProcessWarnings()` before anything else runs and `attach` their pino
 * logger once it exists; warnings emitted in between are held and logged then.
 *
 * Node's printer is the one 'warning' listener its bootstrap registers (none under --no-warnings or
 * NODE_NO_WARNINGS=1), on Node 20 and 24 alike, so removing the listeners present at that point removes
 * it and nothing else. `process.emitWarning` delivers on a later tick, so a warning emitted while the
 * entry module's imports load (none do today) is normally caught too. --no-deprecation still silences
 * deprecations (Node drops them before any listener), --throw-deprecation still throws, and with
 * --trace-warnings (--trace-deprecation) the line carries the stack Node would have printed.
 */
import type { Logger } from 'pino'

/** The fields of one warning line, besides pino's own. */
export interface WarningFields {
  readonly process_warning: { readonly name: string; readonly code: string | null; readonly detail?: string; readonly stack?: string }
}

/** True when Node would print the warning's stack: --trace-warnings, or --trace-deprecation for a deprecation. */
function traced(warning: Error): boolean {
  const flags = process as { traceProcessWarnings?: boolean; traceDeprecation?: boolean }
  return flags.traceProcessWarnings === true || (warning.name === 'DeprecationWarning' && flags.traceDeprecation === true)
}

/** The fields a warning is logged with (exported for tests). */
export function warningFields(warning: Error): WarningFields {
  const { code, detail } = warning as Error & { code?: unknown; detail?: unknown }
  return {
    process_warning: {
      name: warning.name,
      code: typeof code === 'string' ? code : null,
      ...(typeof detail === 'string' ? { detail } : {}),
      ...(traced(warning) && typeof warning.stack === 'string' ? { stack: warning.stack } : {}),
    },
  }
}

/** Where warnings go: held until a logger is attached. */
export class ProcessWarnings {
  private logger: Pick<Logger, 'warn'> | null = null
  private readonly held: Error[] = []

  /** Takes one warning (the 'warning' listener). */
  take(warning: Error): void {
    if (this.logger === null) this.held.push(warning)
    else this.logger.warn(warningFields(warning), warning.message)
  }

  /** From now on warnings go to `logger`; the ones held so far are logged first, in order. */
  attach(logger: Pick<Logger, 'warn'>): void {
    this.logger = logger
    for (const warning of this.held.splice(0)) this.take(warning)
  }

  /** Warnings taken while no logger was attached, as JSON lines (written at exit by `captureProcessWarnings`). */
  heldLines(service: string): string[] {
    return this.held.splice(0).map((w) => JSON.stringify({ level: 40, time: Date.now(), service, ...warningFields(w), msg: w.message }))
  }
}

/**
 * Replaces Node's warning printer with a `ProcessWarnings` for this process. Should the process exit
 * before a logger is attached (a refused config, a usage error), the held warnings are written to stderr
 * as JSON lines in pino's shape.
 */
export function captureProcessWarnings(service: string): ProcessWarnings {
  const warnings = new ProcessWarnings()
  process.removeAllListeners('warning')
  process.on('warning', (warning) => warnings.take(warning))
  process.once('exit', () => {
    for (const line of warnings.heldLines(service)) process.stderr.write(`${line}\n`)
  })
  return warnings
}
