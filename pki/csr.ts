/**
 * PKCS#10 CSRs made on a device, for `sign-csr` and the signer: read and verified by src/der/csr.ts (the
 * controller's enrollment listener uses the same reader), with the project's name rule on the CN.
 */
import { nameProblem } from '../src/core/names.js'
import { CsrError, readCsr, type VerifiedCsr } from '../src/der/csr.js'
import { PkiError } from './errors.js'

export type { VerifiedCsr } from '../src/der/csr.js'

/** Parses a PEM CSR, verifies its self-signature with Node's crypto and checks the CN against the name rule. */
export function verifyCsr(text: string, who = 'sign-csr'): VerifiedCsr {
  let csr: VerifiedCsr
  try {
    csr = readCsr(text, who)
  } catch (err) {
    if (err instanceof CsrError) throw new PkiError(err.message.startsWith('not a') ? `the file is ${err.message}` : err.message)
    throw err
  }
  const problem = nameProblem(csr.name)
  if (problem !== null) throw new PkiError(`the CSR's CN is not a valid name: ${problem}`)
  return csr
}
