/**
 * A reader that stops reading (`pxe-ctl watch | head -40`, `pxe-pki --help | head -1`) closes the pipe;
 * the next write fails with EPIPE, which Node reports as an 'error' event on the stream and, with no
 * listener, as an uncaught exception: a stack trace on the terminal. Here a closed stdout ends the
 * process quietly instead, with status 0: the reader had all it wanted, so the command did its job (a
 * `set -o pipefail` script with `| head` must not fail for it). Node ignores SIGPIPE, so there is no
 * "killed by SIGPIPE" (141) to report without pretending. A closed stderr (`2>&1 | head`) only stops
 * the diagnostics: the process goes on and ends with its own status, so that a failure still says so.
 */

/** The status a process ends with when the reader of its stdout went away. */
export const CLOSED_PIPE_EXIT = 0

/** The part of a stream this needs (process.stdout and process.stderr; fakes in tests). */
export interface ErrorEmitter {
  on(event: 'error', listener: (err: Error) => void): unknown
}

const isClosedPipe = (err: Error) => (err as NodeJS.ErrnoException).code === 'EPIPE'

/**
 * From now on an EPIPE on `stdout` ends the process at once with CLOSED_PIPE_EXIT, writing nothing, and
 * one on `stderr` is dropped; any other error of either stream is thrown as before (not the reader's doing).
 */
export function endQuietlyOnClosedPipe(
  streams: { readonly stdout: ErrorEmitter; readonly stderr: ErrorEmitter } = { stdout: process.stdout, stderr: process.stderr },
  exit: (status: number) => void = (status) => process.exit(status),
): void {
  streams.stdout.on('error', (err) => {
    if (!isClosedPipe(err)) throw err
    exit(CLOSED_PIPE_EXIT)
  })
  streams.stderr.on('error', (err) => {
    if (!isClosedPipe(err)) throw err
  })
}
