/**
 * Where an existing audit log continues: the next `seq` and `prev`, found from the file's tail only
 * (the whole chain is `audit-verify`'s job; a restart must not cost a read of a large log).
 */
import { GENESIS_HASH, hashLine, parseChainFields } from './chain.js'

/** The continuation point of a log, and what was wrong with its end, if anything. */
export interface ResumePoint {
  readonly nextSeq: number
  readonly prev: string
  /** Null when the tail chains correctly; otherwise a sentence for the `audit_chain_resumed` event. */
  readonly problem: string | null
}

/**
 * The continuation point from the log's tail text. `tail` must end with '\n' (a torn last write is
 * sealed by the caller first) and begin at a line start; `atFileStart` says whether it is the whole file.
 * The next line links to the hash of the file's last line even when that line is damaged, so the damage
 * stays visible as one broken line while everything after it chains to its physical predecessor.
 */
export function resumeFromTail(tail: string, atFileStart: boolean): ResumePoint {
  const lines = tail.split('\n')
  lines.pop() // the '' after the final '\n'
  const last = lines[lines.length - 1]
  if (last === undefined) return { nextSeq: 1, prev: GENESIS_HASH, problem: null }
  const prev = hashLine(last)
  const lastFields = parseChainFields(last)
  if ('problem' in lastFields) {
    return { nextSeq: seqAfterDamage(lines, atFileStart), prev, problem: `last line is damaged: ${lastFields.problem}` }
  }
  const nextSeq = lastFields.seq + 1
  const before = lines[lines.length - 2]
  if (before === undefined) {
    if (!atFileStart) return { nextSeq, prev, problem: null } // the line before is out of the tail read
    const ok = lastFields.seq === 1 && lastFields.prev === GENESIS_HASH
    return { nextSeq, prev, problem: ok ? null : 'the only line is not a valid first line' }
  }
  const beforeFields = parseChainFields(before)
  const linked = !('problem' in beforeFields) && beforeFields.seq + 1 === lastFields.seq && hashLine(before) === lastFields.prev
  return { nextSeq, prev, problem: linked ? null : 'the last line does not chain to the line before it' }
}

/** The seq a damaged last line stands for: one past the nearest readable line above it, by distance. */
function seqAfterDamage(lines: readonly string[], atFileStart: boolean): number {
  for (let i = lines.length - 2; i >= 0; i--) {
    const fields = parseChainFields(lines[i] as string)
    if (!('problem' in fields)) return fields.seq + (lines.length - 1 - i) + 1
  }
  return atFileStart ? lines.length + 1 : 1
}
