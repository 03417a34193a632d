/** The two ways pxe-ctl fails, each with its exit status (SPEC "Operator view and operator CLI"). */

/** A bad command line (unknown command or flag, missing argument, bad number): exit 2, with the command's usage. */
export class UsageError extends Error {
  override readonly name = 'UsageError'
  constructor(
    message: string,
    /** The command whose usage is printed after the message (null: the top-level usage). */
    readonly command: string | null = null,
  ) {
    super(message)
  }
}

/** The operation failed (the controller refused, no controller answered, a bad file): exit 1. */
export class CtlError extends Error {
  override readonly name = 'CtlError'
  constructor(
    message: string,
    /** The controller's error code, when a controller answered with one. */
    readonly code: string | null = null,
  ) {
    super(message)
  }
}

/** Exit statuses: the whole contract. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const

/** At most `max` characters of an input, printable, for messages that name what they refuse. */
export function shown(value: string, max = 64): string {
  const clean = value.replace(/[^\x20-\x7e]/g, '?')
  return JSON.stringify(clean.length > max ? `${clean.slice(0, max)}…` : clean)
}
