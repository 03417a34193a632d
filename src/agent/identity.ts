/**
 * A node's identity: its certificate and key, the controller CA it trusts, and the plan keys it pins.
 * Made from a bundle folder (`pxe-pki issue`) or from PEM material held in memory, and checked the
 * same way: one CN that passes the name rule, role node, issued by the CA, the key matching.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto'
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { nameProblem } from '../core/names.js'
import { PinnedKeys } from './pinned-keys.js'

/** PEM material (and the parsed pinned JWKS) of one node. */
export interface IdentityMaterial {
  /** The node's client certificate (PEM). */
  readonly cert: string
  /** Its private key (PEM); never logged. */
  readonly key: string
  /** The controller CA (PEM): the only certificate the agent trusts for the controller. */
  readonly ca: string
  /** The pinned plan JWKS (the parsed content of `plan-jwks.json`), or keys already pinned (shared by many agents). */
  readonly jwks: unknown
}

/** A checked identity, ready for an agent. */
export interface NodeIdentity {
  /** The certificate's CN: the node ID every request and plan is bound to. */
  readonly nodeId: string
  readonly cert: string
  readonly key: string
  readonly ca: string
  readonly pinnedKeys: PinnedKeys
  /** Start of the certificate's validity (ms since the epoch): a renewal is used from then on. */
  readonly notBefore: number
  /** End of the certificate's validity (ms since the epoch). */
  readonly notAfter: number
  /** The certificate's serial (lower-case hex, no leading zeros), for logs. */
  readonly serial: string
}

/** The file names of a bundle folder (as `pxe-pki issue` writes them). */
export const BUNDLE_FILE_NAMES = { key: 'key.pem', cert: 'cert.pem', ca: 'ca.pem', planJwks: 'plan-jwks.json' } as const

/** Thrown when an identity or bundle is unusable; the message says why and never holds key material. */
export class IdentityError extends Error {
  override readonly name = 'IdentityError'
}

/** The single value of a subject attribute, or null when absent or repeated. */
function subjectValue(subject: string, attr: string): string | null {
  const values = subject.split('\n').filter((line) => line.startsWith(`${attr}=`)).map((line) => line.slice(attr.length + 1))
  return values.length === 1 ? values[0]! : null
}

function parseCert(pem: string, what: string): X509Certificate {
  try {
    return new X509Certificate(pem)
  } catch {
    throw new IdentityError(`${what} is not a PEM certificate`)
  }
}

/** Checks PEM material and returns the identity; `nowMs` is the wall clock for the validity check. */
export async function identityFromPem(material: IdentityMaterial, nowMs: number = Date.now()): Promise<NodeIdentity> {
  const cert = parseCert(material.cert, 'the node certificate')
  const ca = parseCert(material.ca, 'the CA certificate')
  const cn = subjectValue(cert.subject, 'CN')
  if (cn === null) throw new IdentityError('the node certificate must have exactly one CN')
  const problem = nameProblem(cn)
  if (problem !== null) throw new IdentityError(`the node certificate's CN ${problem}`)
  const role = subjectValue(cert.subject, 'OU')
  if (role !== 'node') throw new IdentityError(`the certificate of ${cn} is for role ${JSON.stringify(role ?? 'none').slice(0, 40)}, not node`)
  if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) throw new IdentityError(`the certificate of ${cn} was not issued by the bundle's CA`)
  let keyMatches = false
  try {
    keyMatches = cert.checkPrivateKey(createPrivateKey(material.key))
  } catch {
    throw new IdentityError('the private key is not a PEM private key')
  }
  if (!keyMatches) throw new IdentityError(`the private key does not belong to the certificate of ${cn}`)
  const notAfter = Date.parse(cert.validTo)
  if (nowMs > notAfter) throw new IdentityError(`the certificate of ${cn} expired at ${new Date(notAfter).toISOString()}`)
  const pinnedKeys =
    material.jwks instanceof PinnedKeys
      ? material.jwks
      : await PinnedKeys.fromJwks(material.jwks, 'plan-jwks.json').catch((err: Error) => {
          throw new IdentityError(err.message)
        })
  const notBefore = Date.parse(cert.validFrom)
  const serial = cert.serialNumber.toLowerCase().replace(/^0+(?=.)/, '')
  return { nodeId: cn, cert: material.cert, key: material.key, ca: material.ca, pinnedKeys, notBefore, notAfter, serial }
}

async function readBundleFile(dir: string, name: string): Promise<string> {
  const path = join(dir, name)
  try {
    return await readFile(path, 'utf8')
  } catch (err) {
    throw new IdentityError(`cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
}

/** Refuses a private key file that group or others may read or write (as the controller does). */
async function assertPrivateFile(path: string): Promise<void> {
  const mode = (await stat(path)).mode
  if ((mode & 0o077) !== 0) {
    const octal = (mode & 0o777).toString(8).padStart(4, '0')
    throw new IdentityError(`private key ${path} is accessible by group or others (mode ${octal}); run chmod 600 on it`)
  }
}

/** Reads plan-jwks.json of a bundle folder as JSON. */
async function readJwksFile(dir: string): Promise<unknown> {
  const text = await readBundleFile(dir, BUNDLE_FILE_NAMES.planJwks)
  try {
    return JSON.parse(text)
  } catch {
    throw new IdentityError(`${join(dir, BUNDLE_FILE_NAMES.planJwks)} is not JSON`)
  }
}

/** Reads and checks a bundle folder: key.pem, cert.pem, ca.pem, plan-jwks.json (one by one, so the first problem is named). */
export async function loadBundle(dir: string, nowMs: number = Date.now()): Promise<NodeIdentity> {
  const key = await readBundleFile(dir, BUNDLE_FILE_NAMES.key)
  await assertPrivateFile(join(dir, BUNDLE_FILE_NAMES.key))
  const cert = await readBundleFile(dir, BUNDLE_FILE_NAMES.cert)
  const ca = await readBundleFile(dir, BUNDLE_FILE_NAMES.ca)
  const jwks = await readJwksFile(dir)
  return identityFromPem({ cert, key, ca, jwks }, nowMs)
}

/** Re-reads only the bundle's plan-jwks.json (after an operator replaced it following a key rotation). */
export async function loadBundleJwks(dir: string): Promise<PinnedKeys> {
  const jwks = await readJwksFile(dir)
  return PinnedKeys.fromJwks(jwks, join(dir, BUNDLE_FILE_NAMES.planJwks)).catch((err: Error) => {
    throw new IdentityError(err.message)
  })
}
