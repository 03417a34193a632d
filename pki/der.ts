/** A minimal DER reader: splits a constructed value into the exact bytes of its children. */
import { PkiError } from './errors.js'

/** One TLV element: its tag byte, its full encoding and its content bytes. */
export interface DerElement {
  readonly tag: number
  readonly raw: Buffer
  readonly content: Buffer
}

/** Reads the element starting at `offset`; throws PkiError on truncated or non-DER lengths. */
export function readElement(buf: Buffer, offset = 0): DerElement {
  const tag = buf[offset]
  let lenByte = buf[offset + 1]
  if (tag === undefined || lenByte === undefined || (tag & 0x1f) === 0x1f) throw new PkiError('malformed DER')
  let pos = offset + 2
  let length = lenByte
  if (lenByte & 0x80) {
    const count = lenByte & 0x7f
    if (count === 0 || count > 4) throw new PkiError('malformed DER length')
    length = 0
    for (let i = 0; i < count; i++) {
      lenByte = buf[pos++]
      if (lenByte === undefined) throw new PkiError('truncated DER')
      length = length * 256 + lenByte
    }
  }
  const end = pos + length
  if (end > buf.length) throw new PkiError('truncated DER')
  return { tag, raw: buf.subarray(offset, end), content: buf.subarray(pos, end) }
}

/** The children of a constructed element, in order, each with its exact bytes. */
export function children(element: DerElement): DerElement[] {
  if ((element.tag & 0x20) === 0) throw new PkiError('expected a constructed DER value')
  const out: DerElement[] = []
  let offset = 0
  while (offset < element.content.length) {
    const child = readElement(element.content, offset)
    out.push(child)
    offset += child.raw.length
  }
  return out
}
