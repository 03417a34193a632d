/**
 * A refused TLS handshake's OpenSSL verify code or Node error code, reduced to a small fixed set of
 * metric label values: raw codes are many, may change between OpenSSL versions, and an unbounded label
 * would grow the series count. Anything not listed is "other".
 */

/** The label values of `pxe_tls_handshake_failures_total{reason}`. */
export const HANDSHAKE_FAILURE_REASONS = [
  'no_client_certificate', // the client sent no certificate
  'untrusted_certificate', // not issued by our CA (or a broken chain)
  'cert_expired',
  'cert_not_yet_valid',
  'cert_revoked',
  'cert_wrong_purpose', // e.g. no clientAuth extended key usage
  'crl_expired', // the CRL in force is past nextUpdate: every client is refused
  'crl_unusable', // no usable CRL for the check
  'not_tls', // plain HTTP or garbage on the TLS port
  'unsupported_protocol', // TLS below 1.2
  'no_shared_cipher',
  'client_alert', // the client aborted, e.g. it does not trust our server certificate
  'handshake_timeout',
  'connection_reset',
  'other',
] as const

/** One label value of the handshake failure counter. */
export type HandshakeFailureReason = (typeof HANDSHAKE_FAILURE_REASONS)[number]

const EXACT = new Map<string, HandshakeFailureReason>(Object.entries({
  ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE: 'no_client_certificate',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'untrusted_certificate',
  UNABLE_TO_GET_ISSUER_CERT: 'untrusted_certificate',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'untrusted_certificate',
  SELF_SIGNED_CERT_IN_CHAIN: 'untrusted_certificate',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'untrusted_certificate',
  CERT_SIGNATURE_FAILURE: 'untrusted_certificate',
  INVALID_CA: 'untrusted_certificate',
  PATH_LENGTH_EXCEEDED: 'untrusted_certificate',
  CERT_UNTRUSTED: 'untrusted_certificate',
  CERT_REJECTED: 'untrusted_certificate',
  CERT_HAS_EXPIRED: 'cert_expired',
  CERT_NOT_YET_VALID: 'cert_not_yet_valid',
  CERT_REVOKED: 'cert_revoked',
  INVALID_PURPOSE: 'cert_wrong_purpose',
  CRL_HAS_EXPIRED: 'crl_expired',
  UNABLE_TO_GET_CRL: 'crl_unusable',
  CRL_NOT_YET_VALID: 'crl_unusable',
  CRL_SIGNATURE_FAILURE: 'crl_unusable',
  UNABLE_TO_DECRYPT_CRL_SIGNATURE: 'crl_unusable',
  ERR_SSL_HTTP_REQUEST: 'not_tls',
  ERR_SSL_HTTPS_PROXY_REQUEST: 'not_tls',
  ERR_SSL_WRONG_VERSION_NUMBER: 'not_tls',
  ERR_SSL_PACKET_LENGTH_TOO_LONG: 'not_tls',
  ERR_SSL_UNSUPPORTED_PROTOCOL: 'unsupported_protocol',
  ERR_SSL_NO_PROTOCOLS_AVAILABLE: 'unsupported_protocol',
  ERR_SSL_VERSION_TOO_LOW: 'unsupported_protocol',
  ERR_SSL_NO_SHARED_CIPHER: 'no_shared_cipher',
  ERR_SSL_NO_SUITABLE_SIGNATURE_ALGORITHM: 'no_shared_cipher',
  ERR_SSL_NO_SUITABLE_KEY_SHARE: 'no_shared_cipher',
  ERR_TLS_HANDSHAKE_TIMEOUT: 'handshake_timeout',
  ECONNRESET: 'connection_reset',
  EPIPE: 'connection_reset',
} satisfies Record<string, HandshakeFailureReason>))

/** Maps a raw code (`socket.authorizationError`, else the error's `code`) to its label value. */
export function handshakeFailureReason(code: string | undefined): HandshakeFailureReason {
  if (code === undefined) return 'other'
  const exact = EXACT.get(code)
  if (exact !== undefined) return exact
  // OpenSSL reports an alert the client sent as ERR_SSL_SSLV3_ALERT_* or ERR_SSL_TLSV1_ALERT_*.
  if (code.startsWith('ERR_SSL_') && code.includes('_ALERT_')) return 'client_alert'
  return 'other'
}
