/** `pki audit-verify <file>`: checks an audit log's hash chain from disk (needs no PKI directory). */
import { readFile } from 'node:fs/promises'
import { verifyAuditText } from './chain.js'
import type { AuditVerifyResult } from './chain.js'

/** Reads a whole audit log and verifies its chain; rejects only if the file cannot be read. */
export async function verifyAuditFile(path: string): Promise<AuditVerifyResult> {
  return verifyAuditText(await readFile(path, 'utf8'))
}

/** Anything with a `write(text)`, e.g. process.stdout. */
export interface TextSink {
  write(text: string): unknown
}

/**
 * The CLI command: `argv` is the arguments after `audit-verify` (exactly one file).
 * Exit codes: 0 chain intact, 1 chain broken, 2 usage error or unreadable file.
 */
export async function runAuditVerify(argv: readonly string[], out: TextSink, err: TextSink): Promise<number> {
  const [file, ...extra] = argv
  if (file === undefined || file.startsWith('-') || extra.length > 0) {
    err.write('usage: audit-verify <file>\n')
    return 2
  }
  let result: AuditVerifyResult
  try {
    result = await verifyAuditFile(file)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'read error'
    err.write(`cannot read ${file}: ${code}\n`)
    return 2
  }
  if (result.ok) {
    out.write(`ok: ${result.lines} lines, chain intact\n`)
    return 0
  }
  out.write(`broken at line ${result.line}: ${result.reason}\n`) // the verdict, like ok, goes to out
  return 1
}
