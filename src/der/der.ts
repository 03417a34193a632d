/**
 * The one DER reader of the project, strict (minimal lengths, no indefinite length, no trailing bytes
 * where one value is expected): just enough ASN.1 to take CRLs, certificates, CSRs and SPKIs apart, in
 * the controller (src/identity) and in the PKI toolkit (pki/) alike. Our own code rather than
 * node-forge's, so nothing here can ever reach forge's verification paths.
 */

/** The ASN.1 universal tags this module reads. */
export const TAG = {
  BOOLEAN: 0x01,
  INTEGER: 0x02,
  BIT_STRING: 0x03,
  OCTET_STRING: 0x04,
  NULL: 0x05,
  OID: 0x06,
  UTC_TIME: 0x17,
  GENERALIZED_TIME: 0x18,
  SEQUENCE: 0x30,
  CONTEXT_0: 0xa0,
} as const

/** One decoded TLV: `raw` is the whole encoding (tag, length, content), `content` the value bytes. */
export interface DerNode {
  readonly tag: number
  readonly raw: Buffer
  readonly content: Buffer
}

/** Thrown for bytes that are not valid DER; callers wrap it in their own domain error. */
export class DerError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'DerError'
  }
}

/** Reads one TLV starting at `offset`; returns the node and the offset just past it. */
export function readTlv(buf: Buffer, offset: number): { node: DerNode; next: number } {
  if (offset + 2 > buf.length) throw new DerError(`truncated DER at byte ${offset}`)
  const tag = buf[offset] as number
  // High-tag-number form (low five bits all set) never occurs in the structures we read.
  if ((tag & 0x1f) === 0x1f) throw new DerError(`unsupported high tag number at byte ${offset}`)
  let pos = offset + 1
  const first = buf[pos++] as number
  let length: number
  if (first < 0x80) {
    length = first
  } else {
    const count = first & 0x7f
    // 0x80 is BER's indefinite length, which DER forbids; more than 4 length bytes is absurd for a CRL.
    if (count === 0 || count > 4) throw new DerError(`invalid length encoding at byte ${offset}`)
    if (pos + count > buf.length) throw new DerError(`truncated DER length at byte ${offset}`)
    length = 0
    for (let i = 0; i < count; i++) length = length * 256 + (buf[pos++] as number)
    if (length < 0x80 || (buf[pos - count] as number) === 0) {
      throw new DerError(`non-minimal length encoding at byte ${offset}`)
    }
  }
  const end = pos + length
  if (end > buf.length) throw new DerError(`DER value at byte ${offset} runs past the end of the data`)
  return { node: { tag, raw: buf.subarray(offset, end), content: buf.subarray(pos, end) }, next: end }
}

/** Decodes a buffer that must hold exactly one TLV, with no trailing bytes. */
export function readDer(buf: Buffer): DerNode {
  const { node, next } = readTlv(buf, 0)
  if (next !== buf.length) throw new DerError(`${buf.length - next} trailing bytes after the DER value`)
  return node
}

/** The TLVs inside a constructed node (SEQUENCE, SET, explicit tag), in order. */
export function childrenOf(node: DerNode): DerNode[] {
  if ((node.tag & 0x20) === 0) throw new DerError(`tag 0x${node.tag.toString(16)} is not constructed`)
  const out: DerNode[] = []
  let pos = 0
  while (pos < node.content.length) {
    const { node: child, next } = readTlv(node.content, pos)
    out.push(child)
    pos = next
  }
  return out
}

/** Asserts a node's tag, naming `what` in the error. */
export function expectTag(node: DerNode | undefined, tag: number, what: string): DerNode {
  if (node === undefined) throw new DerError(`${what} is missing`)
  if (node.tag !== tag) {
    throw new DerError(`${what}: expected tag 0x${tag.toString(16)}, found 0x${node.tag.toString(16)}`)
  }
  return node
}

/**
 * The longest OBJECT IDENTIFIER and INTEGER decoded to numbers: real ones are far shorter (an OID of 20
 * bytes, a serial or CRL number of at most 20 octets, RFC 5280), and building a bigint from a megabyte of
 * input takes quadratic time — a CRL body could hold the event loop for a second.
 */
export const MAX_OID_BYTES = 128
export const MAX_NUMBER_BYTES = 32

/** Dotted-decimal text of an OBJECT IDENTIFIER's content bytes. */
export function decodeOid(node: DerNode): string {
  const bytes = expectTag(node, TAG.OID, 'object identifier').content
  if (bytes.length === 0) throw new DerError('empty object identifier')
  if (bytes.length > MAX_OID_BYTES) throw new DerError(`object identifier of ${bytes.length} bytes (at most ${MAX_OID_BYTES})`)
  const arcs: bigint[] = []
  let value = 0n
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i] as number
    if (value === 0n && b === 0x80) throw new DerError('non-minimal object identifier arc')
    value = (value << 7n) | BigInt(b & 0x7f)
    if ((b & 0x80) === 0) {
      arcs.push(value)
      value = 0n
    } else if (i === bytes.length - 1) {
      throw new DerError('truncated object identifier')
    }
  }
  const head = arcs[0] as bigint
  const first = head < 40n ? 0n : head < 80n ? 1n : 2n
  return [first, head - first * 40n, ...arcs.slice(1)].join('.')
}

/** An INTEGER's content bytes, checked for minimal two's-complement encoding. */
export function integerBytes(node: DerNode, what: string): Buffer {
  const bytes = expectTag(node, TAG.INTEGER, what).content
  if (bytes.length === 0) throw new DerError(`${what}: empty INTEGER`)
  const b0 = bytes[0] as number
  const b1 = bytes[1]
  if (b1 !== undefined && ((b0 === 0 && b1 < 0x80) || (b0 === 0xff && b1 >= 0x80))) {
    throw new DerError(`${what}: non-minimal INTEGER encoding`)
  }
  return bytes
}

/** A non-negative INTEGER as a bigint. */
export function decodeUnsigned(node: DerNode, what: string): bigint {
  const bytes = integerBytes(node, what)
  if (bytes.length > MAX_NUMBER_BYTES) throw new DerError(`${what}: INTEGER of ${bytes.length} bytes (at most ${MAX_NUMBER_BYTES})`)
  if (((bytes[0] as number) & 0x80) !== 0) throw new DerError(`${what}: negative INTEGER`)
  return BigInt(`0x${bytes.toString('hex')}`)
}

const UTC_TIME = /^(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/
const GENERALIZED_TIME = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/

/** UTCTime or GeneralizedTime in the DER forms RFC 5280 allows (seconds, `Z`, no fraction). */
export function decodeTime(node: DerNode | undefined, what: string): Date {
  if (node === undefined) throw new DerError(`${what} is missing`)
  const text = node.content.toString('latin1')
  let m: RegExpExecArray | null
  let year: number
  if (node.tag === TAG.UTC_TIME && (m = UTC_TIME.exec(text)) !== null) {
    const yy = Number(m[1])
    year = yy >= 50 ? 1900 + yy : 2000 + yy // RFC 5280 4.1.2.5.1
  } else if (node.tag === TAG.GENERALIZED_TIME && (m = GENERALIZED_TIME.exec(text)) !== null) {
    year = Number(m[1])
  } else {
    throw new DerError(`${what}: not a valid UTCTime or GeneralizedTime`)
  }
  const [month, day, hour, minute, second] = m.slice(2).map(Number) as [number, number, number, number, number]
  const ms = Date.UTC(year, month - 1, day, hour, minute, second)
  const back = new Date(ms)
  if (back.getUTCMonth() !== month - 1 || back.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59) {
    throw new DerError(`${what}: impossible date ${text}`)
  }
  return back
}

/** True when the node is a UTCTime or GeneralizedTime (used to spot the optional nextUpdate). */
export function isTime(node: DerNode | undefined): boolean {
  return node !== undefined && (node.tag === TAG.UTC_TIME || node.tag === TAG.GENERALIZED_TIME)
}
