/** Errors of the operator PKI toolkit: one clear sentence each, mapped to an exit code by the CLI. */

/** A refused operation (missing PKI, unknown serial, bad CSR, lock held...); exit code 1. */
export class PkiError extends Error {
  readonly exitCode: number = 1
  constructor(message: string) {
    super(message)
    this.name = 'PkiError'
  }
}

/** A command line that does not fit the command (unknown flag, bad value, bad name); exit code 2. */
export class UsageError extends PkiError {
  override readonly exitCode: number = 2
  constructor(message: string) {
    super(message)
    this.name = 'UsageError'
  }
}
