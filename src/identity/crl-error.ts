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
