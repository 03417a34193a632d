/**
 * What a start built, undone in reverse: each part pushes its closer as soon as it exists (as SPIRE's
 * `defer x.Close()`), so a start that fails half-way releases exactly what it had built, and a stop
 * releases everything in the reverse of the build order, with no hand-written teardown to keep in step.
 */

/** One closer: its name (for the error), and the work. */
interface Closer {
  readonly name: string
  readonly close: () => void | Promise<void>
}

/** A stack of closers; `closeAll` runs every one, newest first, once. */
export class CloserStack {
  private readonly closers: Closer[] = []
  private closing: Promise<void> | null = null

  /** Registers what undoes the part just built. */
  push(name: string, close: () => void | Promise<void>): void {
    if (this.closing !== null) throw new Error(`cannot add "${name}": the stack is already closing`)
    this.closers.push({ name, close })
  }

  /**
   * Runs every closer, newest first, each even when an earlier one failed; rejects with the first failure
   * afterwards (naming its part). A second call waits for the first.
   */
  closeAll(): Promise<void> {
    this.closing ??= (async () => {
      let first: Error | null = null
      for (const { name, close } of this.closers.reverse()) {
        try {
          await close()
        } catch (err) {
          first ??= new Error(`stop: ${name} failed: ${(err as Error).message}`, { cause: err })
        }
      }
      if (first !== null) throw first
    })()
    return this.closing
  }
}
