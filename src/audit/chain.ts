/**
 * The audit log's hash-chain format, pure (no I/O).
 *
 * Every line is one JSON object with `seq` (1-based, +1 per line) and `prev`: the hex SHA-256 of the
 * exact UTF-8 bytes of the previous line without its trailing '\n' (64 zeros for seq 1). Deleting,
 * inserting, reordering or editing a line breaks the link of the line after it.
 */
import { createHash } from 'node:crypto'

/** The `prev` of the first line: 64 zeros. */
export const GENESIS_HASH = '0'.repeat(64)

/** Hex SHA-256 of one line's exact text (without its trailing '\n'). */
export function hashLine(line: string): string {
  return createHash('sha256').update(line, 'utf8').digest('hex')
}

/** The outcome of a verification: the number of lines and the head hash, or the first broken line. */
export type AuditVerifyResult =
  | { ok: true; lines: number; lastHash: string }
  | { ok: false; line: number; reason: string }

/** The chain fields of a line, or why the line cannot carry them. */
export function parseChainFields(line: string): { seq: number; prev: string } | { problem: string } {
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch {
    return { problem: line === '' ? 'empty line' : 'not valid JSON' }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { problem: 'not a JSON object' }
  }
  const { seq, prev } = value as { seq?: unknown; prev?: unknown }
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1) {
    return { problem: 'missing or invalid "seq"' }
  }
  if (typeof prev !== 'string' || !/^[0-9a-f]{64}$/.test(prev)) {
    return { problem: 'missing or invalid "prev"' }
  }
  return { seq, prev }
}

/**
 * Checks a whole log and names the FIRST broken line (1-based line number in the file).
 *
 * Which line is named:
 * - a deleted line: the line after the gap (its seq skips one);
 * - two swapped lines: the first of the pair (its seq is out of order);
 * - an edited line: the edited line itself if the edit broke its JSON, seq or prev; otherwise the line
 *   after it, whose `prev` no longer matches (a hash chain cannot tell which of the two was altered);
 *   an edit of the very last line is only detectable against an externally kept head hash (`lastHash`);
 * - a torn last write (no trailing '\n'): the last line.
 * An empty text is a valid, empty log.
 */
export function verifyAuditText(text: string): AuditVerifyResult {
  if (text === '') return { ok: true, lines: 0, lastHash: GENESIS_HASH }
  const lines = text.split('\n')
  // split leaves '' after a final '\n'; anything else there is a torn last write
  const torn = lines.pop() !== ''
  let prevHash = GENESIS_HASH
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string
    const lineNo = i + 1
    const fields = parseChainFields(line)
    if ('problem' in fields) return { ok: false, line: lineNo, reason: fields.problem }
    if (fields.seq !== lineNo) {
      return { ok: false, line: lineNo, reason: `seq is ${fields.seq}, expected ${lineNo} (a line was deleted, inserted or moved)` }
    }
    if (fields.prev !== prevHash) {
      const what = lineNo === 1 ? 'must be the genesis hash' : `does not match the hash of line ${lineNo - 1} (line ${lineNo - 1} was edited, or this line's prev was)`
      return { ok: false, line: lineNo, reason: `prev ${what}` }
    }
    prevHash = hashLine(line)
  }
  if (torn) {
    return { ok: false, line: lines.length + 1, reason: 'no trailing newline (torn last write)' }
  }
  return { ok: true, lines: lines.length, lastHash: prevHash }
}
