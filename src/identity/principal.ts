/**
 * Turns a TLS peer certificate into a principal, once per TLS socket. The handshake already proved
 * the chain to our CA; this adds the rules OpenSSL does not enforce (SPEC "Identity").
 */
import type { X509Certificate } from 'node:crypto'
import type { TLSSocket } from 'node:tls'
import { isValidName } from '../core/names.js'
import { normalizeSerial } from './crl.js'

/** The client roles (SPEC "Identity"; `signer`: the CA host's signer, SPEC "Device enrollment and renewal"). */
export type Role = 'node' | 'operator' | 'signer'

/** Who is calling, as proven by the client certificate. */
export interface Principal {
  readonly name: string
  readonly role: Role
  readonly serial: string // lower-case hex, no leading zero bytes
  readonly notBefore: number // ms
  readonly notAfter: number // ms
}

/** Why a certificate gives no service (rendered as 401 unauthenticated and audited). */
export interface IdentityFailure {
  readonly reason: string
}

const CLIENT_AUTH_OID = '1.3.6.1.5.5.7.3.2'
const ROLES: ReadonlySet<string> = new Set(['node', 'operator', 'signer'])

/**
 * The subject's attributes from X509Certificate's `subject` text: one `KEY=value` line per RDN.
 * OpenSSL prints it with RFC 2253 escapes and control characters escaped (`\0A` for a newline), so a
 * value cannot start a line of its own. A multi-valued RDN prints as one line, `CN=a + OU=b`: its
 * first attribute then carries a value with ` + ` in it, which no name or role passes, and the others
 * are not seen at all, so such a subject is refused (closed) rather than read as two attributes.
 */
function subjectAttributes(subject: string): Map<string, string[]> {
  const attributes = new Map<string, string[]>()
  for (const line of subject.split('\n')) {
    const eq = line.indexOf('=')
    if (eq <= 0) continue
    const key = line.slice(0, eq)
    const values = attributes.get(key)
    if (values === undefined) attributes.set(key, [line.slice(eq + 1)])
    else values.push(line.slice(eq + 1))
  }
  return attributes
}

/** The single value of a subject attribute, or null when it is absent or repeated. */
function single(attributes: Map<string, string[]>, key: string): string | null {
  const values = attributes.get(key)
  return values?.length === 1 ? values[0]! : null
}

/**
 * Checks a peer certificate against the SPEC's identity rules (revocation is checked per request).
 * It reads the X509Certificate OpenSSL already parsed for the handshake, one field at a time:
 * `getPeerCertificate()` builds every field of the certificate (three fingerprints, the public key,
 * a copy of the DER) and was the largest single cost of a resumed connection (0.3 ms of its 1.5 ms).
 */
export function principalFromCertificate(peer: X509Certificate | undefined): Principal | IdentityFailure {
  if (peer === undefined) return { reason: 'no client certificate' }
  const subject = subjectAttributes(peer.subject)
  const cn = single(subject, 'CN')
  if (cn === null) return { reason: 'the subject must have exactly one CN' }
  if (!isValidName(cn)) return { reason: 'the subject CN breaks the name rule' }
  const ou = single(subject, 'OU')
  if (ou === null) return { reason: 'the subject must have exactly one OU' }
  if (!ROLES.has(ou)) return { reason: `unknown role OU=${JSON.stringify(ou).slice(0, 40)}` }
  // OpenSSL accepts a certificate without any EKU for client auth; the SPEC requires clientAuth.
  // (X509Certificate names the extended key usage `keyUsage`.)
  if (!peer.keyUsage?.includes(CLIENT_AUTH_OID)) return { reason: 'the certificate lacks the clientAuth extended key usage' }
  // Anything but an explicit false is refused, so a runtime without the field fails closed.
  if (peer.ca !== false) return { reason: 'a CA certificate cannot be a client identity' }
  const notBefore = Date.parse(peer.validFrom)
  const notAfter = Date.parse(peer.validTo)
  if (!Number.isFinite(notBefore) || !Number.isFinite(notAfter)) return { reason: 'the certificate validity dates cannot be read' }
  return {
    name: cn,
    role: ou as Role,
    serial: normalizeSerial(peer.serialNumber),
    notBefore,
    notAfter,
  }
}

const cache = new WeakMap<TLSSocket, Principal | IdentityFailure>()

/** Certificates whose verdict is kept (a fleet's worth); beyond it the oldest is dropped first. */
export const VERDICT_CACHE_SIZE = 50_000

/**
 * The verdict of each certificate seen lately, by the SHA-256 of its DER. The verdict is a function of
 * the certificate alone (revocation and validity are checked on every request, not here), so a node
 * reconnecting after a restart is not parsed again: reading the five fields costs 50–60 µs, the
 * fingerprint a few. Only certificates OpenSSL verified under our CA reach it, so what it holds is
 * bounded by what the CA issued, and by its size.
 */
export class VerdictCache {
  private readonly verdicts = new Map<string, Principal | IdentityFailure>()

  constructor(private readonly size = VERDICT_CACHE_SIZE) {}

  /** The certificate's verdict: from the cache, or computed and kept. */
  of(cert: X509Certificate | undefined): Principal | IdentityFailure {
    if (cert === undefined) return principalFromCertificate(cert)
    const key = cert.fingerprint256
    let verdict = this.verdicts.get(key)
    if (verdict === undefined) {
      verdict = principalFromCertificate(cert)
      if (this.verdicts.size >= this.size) this.verdicts.delete(this.verdicts.keys().next().value!)
      this.verdicts.set(key, verdict)
    }
    return verdict
  }

  /** Certificates held. */
  get held(): number {
    return this.verdicts.size
  }
}

const verdicts = new VerdictCache()

/** The principal of a TLS socket, computed on first use and cached for the socket's life. */
export function principalOfSocket(socket: TLSSocket): Principal | IdentityFailure {
  let found = cache.get(socket)
  if (found === undefined) {
    found = socket.authorized ? verdicts.of(socket.getPeerX509Certificate()) : { reason: socket.authorizationError?.toString() ?? 'client certificate not verified' }
    cache.set(socket, found)
  }
  return found
}

/** Type guard separating a principal from a failure. */
export function isPrincipal(value: Principal | IdentityFailure): value is Principal {
  return 'name' in value
}
