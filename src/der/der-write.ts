/**
 * The DER writer that goes with der.ts: just enough to build a PKCS#10 request on a node (the agent makes
 * its key and CSR in memory at boot; node-forge builds CSRs for RSA keys only). Minimal lengths, as DER
 * requires; every value is built from its parts, nothing is parsed here.
 */
import { TAG } from './der.js'

const SET = 0x31
const UTF8_STRING = 0x0c

/** One TLV with a minimal length encoding. */
export function tlv(tag: number, content: Uint8Array): Buffer {
  const length = content.length
  let head: number[]
  if (length < 0x80) head = [tag, length]
  else {
    const bytes: number[] = []
    for (let rest = length; rest > 0; rest = Math.floor(rest / 256)) bytes.unshift(rest % 256)
    head = [tag, 0x80 | bytes.length, ...bytes]
  }
  return Buffer.concat([Buffer.from(head), content])
}

/** SEQUENCE of the encoded parts, in order. */
export function sequence(...parts: readonly Uint8Array[]): Buffer {
  return tlv(TAG.SEQUENCE, Buffer.concat(parts))
}

/** SET of the encoded parts (callers pass one part, or parts already in DER order). */
export function set(...parts: readonly Uint8Array[]): Buffer {
  return tlv(SET, Buffer.concat(parts))
}

/** A small non-negative INTEGER (versions). */
export function smallInteger(value: number): Buffer {
  if (!Number.isInteger(value) || value < 0 || value > 127) throw new RangeError('smallInteger takes 0..127')
  return tlv(TAG.INTEGER, Buffer.from([value]))
}

/** An OBJECT IDENTIFIER from its dotted-decimal text. */
export function objectId(dotted: string): Buffer {
  const arcs = dotted.split('.').map((arc) => {
    if (!/^\d+$/.test(arc)) throw new RangeError(`not an object identifier: ${dotted}`)
    return BigInt(arc)
  })
  if (arcs.length < 2) throw new RangeError(`not an object identifier: ${dotted}`)
  const bytes: number[] = []
  for (const arc of [arcs[0]! * 40n + arcs[1]!, ...arcs.slice(2)]) {
    const chunk: number[] = [Number(arc & 0x7fn)]
    for (let rest = arc >> 7n; rest > 0n; rest >>= 7n) chunk.unshift(Number(rest & 0x7fn) | 0x80)
    bytes.push(...chunk)
  }
  return tlv(TAG.OID, Buffer.from(bytes))
}

/** A UTF8String. */
export function utf8String(text: string): Buffer {
  return tlv(UTF8_STRING, Buffer.from(text, 'utf8'))
}

/** A BIT STRING of whole bytes (no unused bits). */
export function bitString(bytes: Uint8Array): Buffer {
  return tlv(TAG.BIT_STRING, Buffer.concat([Buffer.from([0]), bytes]))
}

/** A constructed context-specific tag [n] around the parts (IMPLICIT SET OF, when the parts are its members). */
export function contextConstructed(n: number, ...parts: readonly Uint8Array[]): Buffer {
  if (!Number.isInteger(n) || n < 0 || n > 30) throw new RangeError('context tag 0..30')
  return tlv(0xa0 | n, Buffer.concat(parts))
}
