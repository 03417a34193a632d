/**
 * The state file format, pure. The file is one JSON object, byte for byte:
 *
 *   {"format":"pxe-controller-state","version":1,"sha256":"<hex>","body":<body>}\n
 *
 * where <body> is JSON.stringify(value) and sha256 is the hex SHA-256 of exactly those body bytes.
 * The whole file stays valid JSON for humans and jq, while the checksum covers the exact body text
 * (no re-serialization on load, so nothing depends on how JSON round-trips).
 */
import { createHash } from 'node:crypto'

export const STATE_FORMAT = 'pxe-controller-state'
export const STATE_VERSION = 1

const HEADER = /^\{"format":"pxe-controller-state","version":(\d+),"sha256":"([0-9a-f]{64})","body":/
const TRAILER = '}\n'

/** The full file text for a value. */
export function encodeStateFile(value: unknown): string {
  const body = JSON.stringify(value)
  if (body === undefined) throw new TypeError('state value is not JSON-serializable')
  return `{"format":"${STATE_FORMAT}","version":${STATE_VERSION},"sha256":"${sha256(body)}","body":${body}${TRAILER}`
}

/** The parsed body of a state file, or a sentence saying what is wrong with it. */
export function decodeStateFile(bytes: Uint8Array): { body: unknown } | { problem: string } {
  if (bytes.length === 0) return { problem: 'the file is empty' }
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch {
    return { problem: 'the file is not valid UTF-8 (corrupted)' }
  }
  const header = HEADER.exec(text)
  if (header === null) return { problem: headerProblem(text) }
  if (Number(header[1]) !== STATE_VERSION) {
    return { problem: `unsupported format version ${header[1]} (this controller reads version ${STATE_VERSION})` }
  }
  if (!text.endsWith(TRAILER)) return { problem: 'the file is truncated (it does not end with "}" and a newline)' }
  const bodyText = text.slice(header[0].length, text.length - TRAILER.length)
  const actual = sha256(bodyText)
  if (actual !== header[2]) {
    return { problem: `checksum mismatch: the body hashes to ${actual} but the header says ${header[2]} (corrupted or edited)` }
  }
  try {
    return { body: JSON.parse(bodyText) as unknown }
  } catch {
    return { problem: 'the body is not valid JSON' }
  }
}

/** Why a file without the expected header is not a state file, as precisely as can be said. */
function headerProblem(text: string): string {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return 'the file is not valid JSON (truncated or corrupted)'
  }
  const format = typeof parsed === 'object' && parsed !== null ? (parsed as { format?: unknown }).format : undefined
  if (format !== STATE_FORMAT) {
    const shown = typeof format === 'string' ? JSON.stringify(format.slice(0, 60)) : 'missing'
    return `not a ${STATE_FORMAT} file (format: ${shown})`
  }
  return 'the header is not in the expected form (corrupted or edited)'
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex')
}
