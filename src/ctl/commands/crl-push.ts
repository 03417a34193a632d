/** `pxe-ctl crl push FILE`: installs a CRL on the controllers live (SPEC "Operator view", POST /v1/crl). */
import { open } from 'node:fs/promises'
import { Refused } from '../api.js'
import type { CommandSpec } from '../command.js'
import { CtlError } from '../errors.js'
import { emit } from '../output.js'
import { renderPairs } from '../table.js'

/** The controller's body limit for a CRL, checked here first so that a wrong file is never sent. */
export const MAX_CRL_BYTES = 1024 * 1024

const PEM_CRL = /^\s*-----BEGIN X509 CRL-----\r?\n([A-Za-z0-9+/=\r\n]+)-----END X509 CRL-----\s*$/

/** Reads FILE and checks it is one PEM `X509 CRL` block of at most 1 MiB; throws CtlError. */
export async function readCrlFile(path: string): Promise<string> {
  let text: string
  try {
    const handle = await open(path, 'r')
    try {
      const { size } = await handle.stat()
      if (size > MAX_CRL_BYTES) throw new CtlError(`${path} is ${size} bytes, over the 1 MiB a CRL push may carry`)
      text = await handle.readFile('utf8')
    } finally {
      await handle.close()
    }
  } catch (err) {
    if (err instanceof CtlError) throw err
    throw new CtlError(`cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
  const m = PEM_CRL.exec(text)
  const der = m === null ? Buffer.alloc(0) : Buffer.from(m[1]!.replace(/\s/g, ''), 'base64')
  // A DER CRL is a SEQUENCE; anything else (a certificate, a key, two CRLs) is refused before sending.
  if (der.length < 2 || der[0] !== 0x30) throw new CtlError(`${path} is not a PEM CRL (one "-----BEGIN X509 CRL-----" block, as "pxe-pki crl" writes)`)
  return text
}

export const crlPush: CommandSpec = {
  words: 'crl push',
  usage: 'FILE',
  summary: 'install a CRL on the controller at once, without copying files or restarting',
  details: `FILE is a PEM CRL ("-----BEGIN X509 CRL-----", at most 1 MiB), as "pxe-pki revoke" or "pxe-pki crl"
writes it. It is checked here, then sent as POST /v1/crl (Content-Type application/pkix-crl). The
controller checks it as it checks a changed tls.crl file (signed by the CA, number never lower, times) and
keeps it where every replica finds it; a refused CRL answers 400 with the reason, the old one staying in
force. A controller without CRL push answers 404: "this controller does not accept CRL pushes", exit 1.

Example:
  $ pxe-pki revoke compaq-07 && pxe-ctl crl push /srv/pxe-pki/crl.pem
  CRL installed by https://10.0.0.5:8443`,
  args: ['FILE'],
  flags: [],
  async run(ctx, parsed) {
    const pem = await readCrlFile(parsed.positionals[0]!)
    const api = await ctx.api()
    let answer
    try {
      answer = await api.pushCrl(pem)
    } catch (err) {
      if (err instanceof Refused && err.status === 404) throw new CtlError(`this controller does not accept CRL pushes (${err.message})`, 'not_supported')
      throw err
    }
    const body = (typeof answer.json === 'object' && answer.json !== null ? answer.json : {}) as Record<string, unknown>
    emit(ctx, body, () => {
      const pairs = Object.entries(body).filter(([, v]) => v === null || typeof v !== 'object').map(([k, v]) => [k, String(v)] as const)
      return [`CRL installed by ${answer.controller}`, ...(pairs.length > 0 ? [renderPairs(pairs)] : [])].join('\n')
    })
  },
}
