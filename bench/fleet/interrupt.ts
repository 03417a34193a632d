/**
 * Ctrl-C or SIGTERM during a run: the child processes (controller, workers) and the run folder (which
 * holds private keys) must not outlive the orchestrator. Cleanups register here; the CLIs install the
 * handlers, which run every cleanup synchronously and exit 130.
 */
const cleanups = new Set<() => void>()

/** Registers a synchronous cleanup; returns its removal. */
export function onInterrupt(fn: () => void): () => void {
  cleanups.add(fn)
  return () => void cleanups.delete(fn)
}

/** Installs the SIGINT and SIGTERM handlers (once, by a CLI). */
export function handleInterrupts(name: string): void {
  const handler = (signal: NodeJS.Signals) => {
    process.stderr.write(`${name}: ${signal}: stopping the processes of the run\n`)
    for (const fn of cleanups) {
      try {
        fn()
      } catch {
        /* best effort: the others must still run */
      }
    }
    process.exit(130)
  }
  process.once('SIGINT', handler)
  process.once('SIGTERM', handler)
}
