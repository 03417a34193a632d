/** Where pxe-ctl writes: the process streams, or buffers in tests. */

export interface Io {
  /** One result line (or block) on stdout; a newline is added. */
  readonly out: (text: string) => void
  /** One diagnostic line on stderr (warnings, progress, -v); a newline is added. */
  readonly err: (text: string) => void
  /** True when stdout is a terminal: watch clears the screen only then. */
  readonly isTTY: boolean
}

/** The real process streams. */
export function processIo(): Io {
  return {
    out: (text) => void process.stdout.write(`${text}\n`),
    err: (text) => void process.stderr.write(`${text}\n`),
    isTTY: process.stdout.isTTY === true,
  }
}
