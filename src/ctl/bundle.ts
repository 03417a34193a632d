/**
 * The operator bundle a context names (`pxe-pki issue NAME --role operator`): key.pem, cert.pem, ca.pem.
 * Checked before any request, so that a wrong folder fails with its reason, not with a TLS alert.
 * Nothing here ever prints key material.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto'
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { nameProblem } from '../core/names.js'
import { CtlError } from './errors.js'

/** The PEM material of an operator, ready for mutual TLS. */
export interface OperatorBundle {
  readonly dir: string
  /** The certificate's CN. */
  readonly name: string
  readonly cert: string
  /** Never printed or logged. */
  readonly key: string
  /** The only certificate trusted for the controllers. */
  readonly ca: string
  readonly notAfter: Date
  /** The certificate's OU (role): operator, unless the bundle was read without requiring it. */
  readonly role: string | null
}

async function readBundleFile(dir: string, file: string): Promise<string> {
  const path = join(dir, file)
  try {
    return await readFile(path, 'utf8')
  } catch (err) {
    throw new CtlError(`bundle ${dir}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
}

function certificate(pem: string, dir: string, file: string): X509Certificate {
  try {
    return new X509Certificate(pem)
  } catch {
    throw new CtlError(`bundle ${dir}: ${file} is not a PEM certificate`)
  }
}

/** The single value of a subject attribute, or null when it is absent or repeated. */
function subjectValue(subject: string, attr: string): string | null {
  const values = subject.split('\n').filter((l) => l.startsWith(`${attr}=`))
  return values.length === 1 ? values[0]!.slice(attr.length + 1) : null
}

/**
 * Reads and checks an operator bundle folder; throws CtlError naming the first problem. `requireOperator`
 * false (a command's requests) lets another role through, so that the controller's own 403 is what the
 * operator sees; `context init` requires it.
 */
export async function loadOperatorBundle(dir: string, requireOperator: boolean, nowMs: number = Date.now()): Promise<OperatorBundle> {
  const key = await readBundleFile(dir, 'key.pem')
  const keyMode = (await stat(join(dir, 'key.pem'))).mode & 0o777
  if ((keyMode & 0o077) !== 0) throw new CtlError(`bundle ${dir}: key.pem is accessible by group or others (mode ${keyMode.toString(8).padStart(4, '0')}); run chmod 600 on it`)
  const certPem = await readBundleFile(dir, 'cert.pem')
  const caPem = await readBundleFile(dir, 'ca.pem')
  const cert = certificate(certPem, dir, 'cert.pem')
  const ca = certificate(caPem, dir, 'ca.pem')
  const name = subjectValue(cert.subject, 'CN')
  if (name === null || nameProblem(name) !== null) throw new CtlError(`bundle ${dir}: cert.pem has no valid CN`)
  const role = subjectValue(cert.subject, 'OU')
  if (role !== 'operator' && requireOperator) {
    throw new CtlError(`bundle ${dir}: cert.pem is a ${role ?? 'role-less'} certificate of ${name}, not an operator one (issue one with "pxe-pki issue NAME --role operator")`)
  }
  if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) throw new CtlError(`bundle ${dir}: cert.pem was not issued by the bundle's ca.pem`)
  let matches = false
  try {
    matches = cert.checkPrivateKey(createPrivateKey(key))
  } catch {
    throw new CtlError(`bundle ${dir}: key.pem is not a PEM private key`)
  }
  if (!matches) throw new CtlError(`bundle ${dir}: key.pem does not belong to cert.pem`)
  const notAfter = new Date(cert.validTo)
  if (nowMs > notAfter.getTime()) throw new CtlError(`bundle ${dir}: the certificate of ${name} expired at ${notAfter.toISOString()}`)
  if (nowMs < Date.parse(cert.validFrom)) throw new CtlError(`bundle ${dir}: the certificate of ${name} is valid only from ${new Date(cert.validFrom).toISOString()}`)
  return { dir, name, cert: certPem, key, ca: caPem, notAfter, role }
}
