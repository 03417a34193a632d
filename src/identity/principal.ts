/**
 * Turns a TLS peer certificate into a principal, once per TLS socket. The handshake already proved
 * the chain to our CA; this adds the rules OpenSSL does not enforce (SPEC "Identity").
 */
import type { PeerCertificate, DetailedPeerCertificate } from 'node:tls'
import type { TLSSocket } from 'node:tls'
import { isValidName } from '../core/names.js'
import { normalizeSerial } from './crl.js'

export type Role = 'node' | 'operator'

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
const ROLES: ReadonlySet<string> = new Set(['node', 'operator'])

/** The single value of a subject attribute, or null when it is absent or repeated. */
function single(value: string | string[] | undefined): string | null {
  if (typeof value !== 'string') return null
  return value
}

/** Checks a peer certificate against the SPEC's identity rules (revocation is checked per request). */
export function principalFromCertificate(peer: PeerCertificate | DetailedPeerCertificate): Principal | IdentityFailure {
  if (!peer || !peer.raw) return { reason: 'no client certificate' }
  const subject = peer.subject as unknown as Record<string, string | string[] | undefined>
  const cn = single(subject?.CN)
  if (cn === null) return { reason: 'the subject must have exactly one CN' }
  if (!isValidName(cn)) return { reason: 'the subject CN breaks the name rule' }
  const ou = single(subject?.OU)
  if (ou === null) return { reason: 'the subject must have exactly one OU' }
  if (!ROLES.has(ou)) return { reason: `unknown role OU=${JSON.stringify(ou).slice(0, 40)}` }
  // OpenSSL accepts a certificate without any EKU for client auth; the SPEC requires clientAuth.
  if (!peer.ext_key_usage?.includes(CLIENT_AUTH_OID)) return { reason: 'the certificate lacks the clientAuth extended key usage' }
  // The fields come from the certificate OpenSSL already parsed for the handshake (the same source as
  // X509Certificate's): parsing its DER a second time per connection was a seventh of the controller's
  // CPU while 10,000 nodes reconnected after a restart. `ca` is set on every supported Node (20.11+);
  // anything but an explicit false is refused, so a runtime without it fails closed.
  if (peer.ca !== false) return { reason: 'a CA certificate cannot be a client identity' }
  const notBefore = Date.parse(peer.valid_from)
  const notAfter = Date.parse(peer.valid_to)
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

/** The principal of a TLS socket, computed on first use and cached for the socket's life. */
export function principalOfSocket(socket: TLSSocket): Principal | IdentityFailure {
  let found = cache.get(socket)
  if (found === undefined) {
    found = socket.authorized ? principalFromCertificate(socket.getPeerCertificate()) : { reason: socket.authorizationError?.toString() ?? 'client certificate not verified' }
    cache.set(socket, found)
  }
  return found
}

/** Type guard separating a principal from a failure. */
export function isPrincipal(value: Principal | IdentityFailure): value is Principal {
  return 'name' in value
}
