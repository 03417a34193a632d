/** Certificate serial numbers: 16 CSPRNG bytes, positive, lower-case hex without colons. */
import { randomBytes } from 'node:crypto'
import { UsageError } from './errors.js'

/** Size of a serial in bytes (SPEC: 16 bytes from a CSPRNG). */
export const SERIAL_BYTES = 16

/**
 * A fresh random serial (32 hex digits). The top bit is cleared so the DER INTEGER is positive; the first
 * byte is kept ≥ 0x10 so the hex never starts with "0" — every tool (Node, OpenSSL, the index) prints it alike.
 */
export function newSerial(): string {
  const bytes = randomBytes(SERIAL_BYTES)
  let first = bytes[0]! & 0x7f
  if (first < 0x10) first |= 0x40
  bytes[0] = first
  return bytes.toString('hex')
}

/** Normalizes an operator-typed serial (any case, colons allowed) to lower-case hex without leading zeros. */
export function normalizeSerial(input: string): string {
  const hex = input.replaceAll(':', '').trim().toLowerCase()
  if (hex.length === 0 || hex.length > 64 || !/^[0-9a-f]+$/.test(hex)) {
    throw new UsageError(`invalid serial "${printable(input)}": expected hexadecimal digits (colons allowed)`)
  }
  const stripped = hex.replace(/^0+/, '')
  return stripped.length === 0 ? '0' : stripped
}

/** Keeps an echoed operator value on one line and short. */
export function printable(value: string): string {
  const clean = value.replace(/[^\x20-\x7e]/g, '?')
  return clean.length > 80 ? `${clean.slice(0, 77)}...` : clean
}
