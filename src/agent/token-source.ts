/**
 * Where pxe-node reads its bootstrap token: a file (--token-file, e.g. handed over by the PXE boot config)
 * or an environment variable (--token-env). Read once; no message ever repeats its content, since it may
 * be the secret itself.
 */
import { readFile } from 'node:fs/promises'
import { parseToken, tokenProblem, type EnrollToken } from '../core/enroll-token.js'

/** A token that cannot be read or is malformed; the message names the source, never the content. */
export class TokenSourceError extends Error {
  override readonly name = 'TokenSourceError'
}

/** Reads and parses the token of a file or an environment variable. */
export async function readToken(source: { readonly file: string } | { readonly env: string }, env: NodeJS.ProcessEnv = process.env): Promise<EnrollToken> {
  let text: string
  let where: string
  if ('file' in source) {
    where = `the token file ${source.file}`
    try {
      text = await readFile(source.file, 'utf8')
    } catch (err) {
      throw new TokenSourceError(`cannot read ${where} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
    }
  } else {
    where = `the environment variable ${source.env}`
    const value = env[source.env]
    if (value === undefined || value.trim() === '') throw new TokenSourceError(`${where} is not set`)
    text = value
  }
  const problem = tokenProblem(text)
  if (problem !== null) throw new TokenSourceError(`${where} does not hold a token: ${problem}`)
  return parseToken(text)
}
