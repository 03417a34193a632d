/** The one error type of CRL parsing and verification, with a stable code callers can switch on. */

/** Why a CRL was refused: bytes that are not a CRL, a feature we refuse, or a failed check against the CA. */
export type CrlErrorCode = 'malformed' | 'unsupported' | 'wrong_issuer' | 'bad_signature'

/** Thrown by `parseCrl`, `verifyCrl` and `normalizeSerial`; `message` is written for an operator. */
export class CrlError extends Error {
  constructor(
    readonly code: CrlErrorCode,
    message: string,
  ) {
    super(message)
    this.name = 'CrlError'
  }
}

/** Input quoted in a message is cut to this many characters (SPEC "Errors": a message never quotes more). */
export const MAX_QUOTED_INPUT = 64

/** `text` (read from a CRL under judgement) cut to MAX_QUOTED_INPUT characters for a message. */
export function quoteInput(text: string): string {
  return text.length <= MAX_QUOTED_INPUT ? text : `${text.slice(0, MAX_QUOTED_INPUT - 1)}…`
}
