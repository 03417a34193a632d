/**
 * The enrollment queue in the state directory (the file backend's EnrollStore), built like the state's own
 * store (journaled-file-store.ts): a checksummed snapshot, `enroll-requests.json` (0600, the previous good
 * copy beside it), and an append-only journal of the changes since, `enroll-requests.journal`, one
 * checksummed line per write (journal-format.ts), fsynced before the write is acknowledged. A write costs
 * what it changes, not the whole queue: a boot storm of a thousand nodes rewrote a growing file of up to
 * 2 MB on every change when the queue was one file (21.8 ms of controller CPU per enrollment). Once the
 * journal outgrows the snapshot (and 1 MiB), the queue is written whole and the journal starts over.
 *
 * Crash safety as for the state: only the last line can be torn, and a torn tail is ignored and cut off
 * before the next append; a compaction that stops half-way leaves a snapshot whose `journalSeq` says which
 * lines it holds. Any other damage stops the start (StateFileError) and nothing on disk is changed.
 */
import { statSync } from 'node:fs'
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { z } from 'zod'
import { storedEnrollSchema, type EnrollStore, type StoredEnroll } from '../core/enroll-record.js'
import { JournalFile } from './journal-file.js'
import { decodeJournalLine, splitJournal } from './journal-format.js'
import { SnapshotFile } from './snapshot-file.js'
import { StateFileError } from './state-file-error.js'

export const ENROLL_FILE = 'enroll-requests.json'
export const ENROLL_JOURNAL = 'enroll-requests.journal'

/** More than the queue ever holds (10,000 pending, and answered ones for 10 minutes). */
const MAX_RECORDS = 50_000

const enrollFileSchema = z
  .object({
    format: z.literal('pxe-enroll-requests'),
    version: z.literal(1),
    journalSeq: z.number().int().min(0),
    requests: z.array(storedEnrollSchema).max(MAX_RECORDS),
  })
  .strict()
type EnrollFile = z.infer<typeof enrollFileSchema>

const changeSchema = z
  .object({ put: z.array(storedEnrollSchema).max(MAX_RECORDS), deleted: z.array(z.string().max(64)).max(MAX_RECORDS) })
  .strict()

export interface EnrollFileStoreOptions {
  /** Compact once the journal is larger than this many bytes and than the last snapshot (default 1 MiB). */
  readonly minCompactBytes?: number
}

/** The queue's store in `stateDir`. One store, one process, per directory. */
export class EnrollFileStore implements EnrollStore {
  readonly journalPath: string
  private readonly snapshots: SnapshotFile<EnrollFile>
  private readonly records = new Map<string, StoredEnroll>()
  private readonly journal: JournalFile
  private seq = 0
  private snapshotBytes = 0
  private hasSnapshot = false
  private loaded = false
  /** Set by a failed write: what reached the disk is unknown, so the next write is a whole snapshot. */
  private needsFull = false

  constructor(
    readonly dir: string,
    private readonly opts: EnrollFileStoreOptions = {},
  ) {
    this.snapshots = new SnapshotFile(dir, enrollFileSchema, { fileName: ENROLL_FILE, validateOnSave: false })
    this.journalPath = join(dir, ENROLL_JOURNAL)
    this.journal = new JournalFile(this.journalPath)
  }

  /** The requests kept; a damaged snapshot or journal stops the start (StateFileError). */
  async load(): Promise<StoredEnroll[]> {
    const saved = await this.snapshots.load()
    this.loaded = true
    this.records.clear()
    const journal = await readFile(this.journalPath).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null
      throw this.damaged(`the journal cannot be read (${err.code ?? String(err)})`)
    })
    if (saved === null) {
      if (journal !== null && journal.length > 0) throw this.damaged('the journal exists but the snapshot does not (deleted or moved by hand?)')
      return []
    }
    this.hasSnapshot = true
    this.snapshotBytes = (await stat(this.snapshots.path)).size
    for (const record of saved.requests) this.records.set(record.id, record)
    this.seq = saved.journalSeq
    if (journal !== null) this.replay(saved.journalSeq, journal)
    return [...this.records.values()]
  }

  async write(put: readonly StoredEnroll[], deleted: readonly string[]): Promise<void> {
    if (!this.loaded) await this.load() // never append to a journal nobody has checked
    for (const id of deleted) this.records.delete(id)
    for (const record of put) this.records.set(record.id, record)
    try {
      const limit = Math.max(this.opts.minCompactBytes ?? 1 << 20, this.snapshotBytes)
      if (this.needsFull || !this.hasSnapshot || this.journal.goodBytes > limit) await this.compact()
      else this.append({ put, deleted })
      this.needsFull = false
    } catch (err) {
      this.needsFull = true
      this.journal.close()
      throw err
    }
  }

  private replay(baseSeq: number, bytes: Buffer): void {
    const { lines, completeBytes } = splitJournal(bytes)
    let expected = baseSeq + 1
    lines.forEach((line, i) => {
      const decoded = decodeJournalLine(line)
      if ('problem' in decoded) throw this.damaged(`journal line ${i + 1}: ${decoded.problem}`)
      if (decoded.seq < expected) return // already in the snapshot (a compaction stopped half-way)
      if (decoded.seq !== expected) throw this.damaged(`journal line ${i + 1} has seq ${decoded.seq}, expected ${expected}`)
      const change = changeSchema.safeParse(decoded.delta)
      if (!change.success) throw this.damaged(`journal line ${i + 1} is not a valid change: ${change.error.issues[0]?.message ?? 'invalid'}`)
      for (const id of change.data.deleted) this.records.delete(id)
      for (const record of change.data.put) this.records.set(record.id, record)
      expected += 1
    })
    this.seq = expected - 1
    this.journal.goodBytes = completeBytes
  }

  private append(change: { put: readonly StoredEnroll[]; deleted: readonly string[] }): void {
    this.journal.append(this.seq + 1, change)
    this.seq += 1
  }

  private async compact(): Promise<void> {
    await this.snapshots.save({ format: 'pxe-enroll-requests', version: 1, journalSeq: this.seq, requests: [...this.records.values()] })
    this.hasSnapshot = true
    this.snapshotBytes = statSync(this.snapshots.path).size
    this.journal.reset() // the snapshot holds its lines
  }

  private damaged(problem: string): StateFileError {
    return new StateFileError(this.journalPath, problem, this.snapshots.prevPath, false)
  }
}
