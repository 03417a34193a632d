/**
 * The controller's "busy, come back in X" at accept time: instead of starting a TLS handshake it could
 * not finish before the client gives up, the controller writes one plaintext line and closes
 * (server/admission.ts). A TLS client never mistakes it for TLS: a TLS record starts with a content type
 * byte 20..24, this line with "P" (0x50); Node's TLS client reports it as ERR_SSL_WRONG_VERSION_NUMBER, and
 * the agent reads the line itself (agent/busy-aware-socket.ts). No certificate or secret is involved:
 * the line says only when to come back.
 *
 *     PXE-BUSY retry_after_ms=1234\r\n
 */

const PREFIX = 'PXE-BUSY retry_after_ms='
/** A notice never needs more (the prefix, 9 digits, CRLF); anything longer is not one. */
export const BUSY_NOTICE_MAX_BYTES = 64
const NOTICE = /^PXE-BUSY retry_after_ms=(\d{1,9})\r\n/

/** The notice for an appointment `retryAfterMs` from now. */
export function busyNotice(retryAfterMs: number): Buffer {
  return Buffer.from(`${PREFIX}${Math.max(0, Math.min(999_999_999, Math.round(retryAfterMs)))}\r\n`, 'latin1')
}

/** True when `first` (the first bytes a server sent) can only be a busy notice, never TLS. */
export function looksLikeBusyNotice(first: Buffer): boolean {
  return first.length > 0 && first[0] === 0x50
}

/** The appointment of a complete notice at the start of `bytes`, or null when they are not one. */
export function parseBusyNotice(bytes: Buffer): number | null {
  const match = NOTICE.exec(bytes.subarray(0, BUSY_NOTICE_MAX_BYTES).toString('latin1'))
  return match === null ? null : Number(match[1])
}

/**
 * True when a TLS client's error is what reading a busy notice looks like to a client that does not
 * read it itself (Node's "wrong version number"): the connection was deferred, or the port does not
 * speak TLS at all.
 */
export function isDeferredConnectionError(err: unknown): boolean {
  const e = err as NodeJS.ErrnoException | null | undefined
  return e?.code === 'ERR_SSL_WRONG_VERSION_NUMBER' || /wrong version number/.test(String(e?.message))
}
