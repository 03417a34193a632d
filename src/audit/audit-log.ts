/**
 * The hash-chained security audit log: one pino JSON line per event, each carrying `seq` and `prev`
 * (see chain.ts). Lines are written synchronously, so the chain state advances in write order and the
 * hashed text is exactly the text on disk. One writer per file: two processes appending to the same log
 * would interleave two chains.
 */
import { close as closeCb, fstat, open as openCb, read as readCb, write as writeCb } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { dirname } from 'node:path'
import { promisify } from 'node:util'
import { pino } from 'pino'
import type { Logger } from 'pino'
import { hashLine } from './chain.js'
import type { AuditEventName } from './audit-events.js'
import { resumeFromTail } from './resume-point.js'
export type { AuditEventName } from './audit-events.js'
import { readTail } from './tail-reader.js'

const openAsync = promisify(openCb)
const fstatAsync = promisify(fstat)
const writeAsync = promisify(writeCb)
const readAsync = promisify(readCb)
const closeAsync = promisify(closeCb)

/** Keys the chain owns; a field with one of these names is kept under `field_<name>` instead. */
const RESERVED = new Set(['level', 'time', 'seq', 'prev', 'event'])
/** Private-key-like keys, censored whatever a caller passes (the log takes plain fields only). */
const REDACT_PATHS = ['key', 'privateKey', 'private_key', 'd', '*.key', '*.privateKey', '*.private_key', '*.d']

/** Options of AuditLog.open. */
export interface AuditLogOptions {
  /** The clock for the `time` field, in ms since the epoch (default Date.now). */
  now?: () => number
  /** fsync after every line (default false: a line survives a process crash, not a power loss, until close). */
  fsyncEachLine?: boolean
}

/** An open, append-only audit log continuing the chain of the file it was opened on. */
export class AuditLog {
  private seq: number
  private lastHash: string
  private closed = false
  private readonly logger: Logger
  private readonly dest: ReturnType<typeof pino.destination>

  private constructor(fd: number, nextSeq: number, prev: string, opts: AuditLogOptions) {
    this.seq = nextSeq - 1
    this.lastHash = prev
    const now = opts.now ?? Date.now
    this.dest = pino.destination({ dest: fd, sync: true, fsync: opts.fsyncEachLine ?? false })
    const stream = {
      write: (line: string): void => {
        this.dest.write(line)
        // advance only once the line is handed to the file, so a failed write does not skip a seq
        this.seq += 1
        this.lastHash = hashLine(line.endsWith('\n') ? line.slice(0, -1) : line)
      },
    }
    this.logger = pino(
      {
        level: 'info',
        base: null,
        timestamp: () => `,"time":"${new Date(now()).toISOString()}"`,
        mixin: () => ({ seq: this.seq + 1, prev: this.lastHash }),
        redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      },
      stream,
    )
  }

  /**
   * Opens (creating with mode 0600) the log at `path` and continues its chain. A torn last write is
   * sealed with a newline and kept as evidence; a torn or broken tail is recorded as `audit_chain_resumed`.
   * A missing folder is created with mode 0700, as the state directory is: `audit_log:
   * /var/log/pxe/audit.log` works on a fresh host (an existing folder keeps its mode).
   */
  static async open(path: string, opts: AuditLogOptions = {}): Promise<AuditLog> {
    await mkdir(dirname(path), { recursive: true, mode: 0o700 })
    const fd = await openAsync(path, 'a+', 0o600)
    try {
      let { size } = await fstatAsync(fd)
      let torn = false
      if (size > 0) {
        const last = Buffer.alloc(1)
        await readAsync(fd, last, 0, 1, size - 1)
        if (last[0] !== 0x0a) {
          await writeAsync(fd, '\n')
          size += 1
          torn = true
        }
      }
      const { text, atFileStart } = size > 0 ? await readTail(fd, size) : { text: '', atFileStart: true }
      const point = resumeFromTail(text, atFileStart)
      const log = new AuditLog(fd, point.nextSeq, point.prev, opts)
      if (torn || point.problem !== null) {
        log.record('audit_chain_resumed', {
          torn_last_write: torn,
          problem: point.problem ?? 'none',
          detail: 'history was not rewritten; run audit-verify to locate the damage',
        })
      }
      return log
    } catch (err) {
      await closeAsync(fd).catch(() => undefined)
      throw err
    }
  }

  /** Writes one event line synchronously; reserved field names are kept as `field_<name>`. */
  record(event: AuditEventName, fields: Record<string, unknown> = {}): void {
    if (this.closed) throw new Error(`audit log is closed; cannot record ${event}`)
    const obj: Record<string, unknown> = { event }
    for (const [k, v] of Object.entries(fields)) obj[RESERVED.has(k) ? `field_${k}` : k] = v
    this.logger.info(obj)
  }

  /** The `seq` of the last line written (0 for an empty log). */
  get lastSeq(): number {
    return this.seq
  }

  /** Flushes, fsyncs and closes the file. Further records throw. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.dest.flushSync() // also fsyncs
    await new Promise<void>((resolve, reject) => {
      this.dest.once('close', () => resolve())
      this.dest.once('error', reject)
      this.dest.end()
    })
  }
}
