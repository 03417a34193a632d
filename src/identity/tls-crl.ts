/**
 * The complete options for a fresh secure context, built whenever the CRL changes. (Per-request
 * revocation checks use `ParsedCrl.revokedSerials` against the principal's normalised serial.)
 *
 * Why fresh ticket keys: `server.setSecureContext(opts)` builds the new context with `opts.ticketKeys`,
 * or, when absent, with the ticket keys the server was created with (`this.ticketKeys` is kept across
 * calls). A resumed session skips certificate verification, so the CRL is never consulted: with the old
 * keys a revoked client could resume a pre-revocation session. New keys make old tickets undecryptable,
 * which forces a full handshake and so a CRL check. The controller draws them in server/ticket-keys.ts
 * (and keeps them across restarts); without `ticketKeys` each build draws its own.
 *
 * Why an explicit session ID context: `setSecureContext` otherwise derives it from `process.argv`, so a
 * restart with another command line (another Node path, another flag) would refuse every saved session.
 */
import { constants, createHash, randomBytes } from 'node:crypto'
import type { SecureContextOptions } from 'node:tls'

/** ECDHE key exchange with AEAD ciphers only, for TLS 1.2; the TLS 1.3 suites are all AEAD. */
export const TLS12_CIPHERS = [
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
] as const

/** The TLS 1.3 suites; Node moves `TLS_*` names of the cipher string to the TLS 1.3 list. */
export const TLS13_CIPHERS = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'] as const

/** The `ciphers` string for every context we build. */
export const CIPHERS = [...TLS13_CIPHERS, ...TLS12_CIPHERS].join(':')

/**
 * How long a TLS session stays resumable (24 h; Node's default is 5 minutes, too short to outlast a
 * restart of a controller whose nodes hold keep-alive connections for hours). Every request is still
 * checked against the revocation set and the certificate's validity (http/authenticate.ts).
 */
export const TLS_SESSION_LIFETIME_SECONDS = 24 * 60 * 60

/** PEM material of a secure context; `crlPem` is the CRL in force (`ParsedCrl.pem`). */
export interface SecureContextMaterial {
  readonly ca: string | Buffer
  readonly cert: string | Buffer
  readonly key: string | Buffer
  readonly crlPem: string | Buffer
  /** The 48 bytes of session-ticket keys; drawn afresh when absent. */
  readonly ticketKeys?: Buffer
}

/** The session ID context: sessions belong to this CA (OpenSSL resumes no session made under another). */
function sessionIdContext(ca: string | Buffer): string {
  return createHash('sha256').update(ca).digest('hex').slice(0, 32) // OpenSSL's limit: 32 bytes
}

/**
 * The complete options for `tls.createSecureContext` / `server.setSecureContext`. Complete because
 * `setSecureContext` resets every option it is not given (ciphers, minVersion, secureOptions, ...).
 * Without `m.ticketKeys` each call draws new session-ticket keys (see the file comment). `requestCert` and
 * `rejectUnauthorized` are server options, not context options: the server sets them once.
 */
export function buildSecureContextOptions(m: SecureContextMaterial): SecureContextOptions {
  return {
    ca: m.ca,
    cert: m.cert,
    key: m.key,
    crl: m.crlPem,
    minVersion: 'TLSv1.2',
    ciphers: CIPHERS,
    honorCipherOrder: true,
    // Renegotiation is a DoS lever and lets a peer change identity mid-connection (TLS 1.2 only);
    // compression leaks secrets through lengths (CRIME).
    secureOptions: constants.SSL_OP_NO_RENEGOTIATION | constants.SSL_OP_NO_COMPRESSION,
    ticketKeys: m.ticketKeys ?? randomBytes(48),
    sessionIdContext: sessionIdContext(m.ca),
    sessionTimeout: TLS_SESSION_LIFETIME_SECONDS,
  }
}
