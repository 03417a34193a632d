/**
 * The journal beside the state file, pure. One line per write, byte for byte:
 *
 *   {"seq":<n>,"sha256":"<hex>","delta":<delta>}\n
 *
 * where <delta> is JSON.stringify(delta) and sha256 covers exactly those bytes (as in the state file, no
 * re-serialization on load). `seq` grows by one per line. Lines are appended and fsynced before the write
 * is acknowledged, so a crash can only leave a torn LAST line, never a damaged earlier one.
 */
import { createHash } from 'node:crypto'

const PREFIX = /^\{"seq":(\d{1,15}),"sha256":"([0-9a-f]{64})","delta":/
const SUFFIX = '}'

/** One journal line (with its newline) for a delta. */
export function encodeJournalLine(seq: number, delta: unknown): string {
  const text = JSON.stringify(delta)
  if (text === undefined) throw new TypeError('delta is not JSON-serializable')
  return `{"seq":${seq},"sha256":"${sha256(text)}","delta":${text}${SUFFIX}\n`
}

/** A decoded line, or a sentence saying what is wrong with it. */
export type DecodedLine = { readonly seq: number; readonly delta: unknown } | { readonly problem: string }

/** Decodes one line (without its newline). */
export function decodeJournalLine(line: string): DecodedLine {
  const head = PREFIX.exec(line)
  if (head === null || !line.endsWith(SUFFIX)) return { problem: 'not a journal line (corrupted or edited)' }
  const text = line.slice(head[0].length, line.length - SUFFIX.length)
  if (sha256(text) !== head[2]) return { problem: 'checksum mismatch (corrupted or edited)' }
  try {
    return { seq: Number(head[1]), delta: JSON.parse(text) as unknown }
  } catch {
    return { problem: 'the delta is not valid JSON' }
  }
}

/** The journal's complete lines and where the last complete line ends (a torn tail starts there). */
export function splitJournal(bytes: Buffer): { lines: string[]; completeBytes: number; tornTail: boolean } {
  const end = bytes.lastIndexOf(0x0a) + 1
  const text = bytes.subarray(0, end).toString('utf8')
  const lines = text === '' ? [] : text.slice(0, -1).split('\n')
  return { lines, completeBytes: end, tornTail: end < bytes.length }
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex')
}
