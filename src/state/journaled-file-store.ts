/**
 * The embedded state store: a checksummed snapshot (`state.json`, written by SnapshotFile: temp file,
 * fsync, rename, directory fsync, previous copy kept as `.prev`) plus an append-only journal of the
 * changes since (`state.journal`, see journal-format.ts). A write appends one line and fsyncs it, so its
 * cost follows the size of the change; once the journal outgrows the snapshot it is compacted: the whole
 * state becomes the new snapshot (recording the last journal line it contains), then the journal starts over.
 *
 * A write's file steps run synchronously (see durable-fs.ts for why): the answers waiting for it are
 * released as soon as the disk has it, never a turn of a busy event loop per step later.
 *
 * Crash safety: a line is acknowledged only after its fsync, so only the last line can be torn; a torn
 * tail is ignored on load and cut off before the next append. A compaction that stops half-way leaves a
 * snapshot whose `journalSeq` says which old lines it already holds. Any other damage stops the start,
 * and nothing on disk is changed (StateFileError, as for the state file).
 */
import { statSync } from 'node:fs'
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { z } from 'zod'
import type { DurableState, StateDelta } from '../core/durable-state.js'
import type { SnapshotV1 } from '../core/types.js'
import { durableStateSchema, stateDeltaSchema } from '../core/durable-state-schema.js'
import { fromVersion1 } from '../core/snapshot-schema.js'
import { controllerSnapshotSchema } from '../core/snapshot-schema.js'
import { StateBuilder } from './apply-delta.js'
import { SnapshotFile } from './snapshot-file.js'
import { decodeJournalLine, splitJournal } from './journal-format.js'
import { JournalFile } from './journal-file.js'
import { StateFileError } from './state-file-error.js'
import type { StateStore } from './state-store.js'

/** The snapshot file's body: the state and the last journal line it contains, or a version-1 snapshot. */
type SnapshotBody = (DurableState & { readonly journalSeq: number }) | SnapshotV1
const snapshotBodySchema = z.union([
  durableStateSchema.extend({ journalSeq: z.number().int().min(0) }).strict(),
  controllerSnapshotSchema, // version 1, written by earlier releases (no journal)
]) as unknown as z.ZodType<SnapshotBody>

export interface JournaledFileStoreOptions {
  /** Compact once the journal is larger than this many bytes and than the last snapshot (default 1 MiB). */
  readonly minCompactBytes?: number
}

/** A StateStore in one directory (created 0700). One store, one process, per directory. */
export class JournaledFileStore implements StateStore {
  readonly journalPath: string
  private readonly snapshots: SnapshotFile<SnapshotBody>
  private readonly journal: JournalFile
  private seq = 0
  private snapshotBytes = 0
  private hasSnapshot = false
  private loaded = false
  private busy = false
  /** Set by a failed write: what it kept is unknown, so the next write is a whole snapshot. */
  private needsFull = false

  constructor(
    readonly dir: string,
    private readonly opts: JournaledFileStoreOptions = {},
  ) {
    // The controller validates nothing it produces itself: what is read back is validated in load().
    this.snapshots = new SnapshotFile<SnapshotBody>(dir, snapshotBodySchema, { validateOnSave: false })
    this.journalPath = join(dir, 'state.journal')
    this.journal = new JournalFile(this.journalPath)
  }

  /** The state file (for messages and tests). */
  get path(): string {
    return this.snapshots.path
  }

  /** The saved state (snapshot + journal), null before the first write; throws StateFileError on damage. */
  async load(): Promise<DurableState | null> {
    const body = await this.snapshots.load()
    this.loaded = true
    const journal = await readFile(this.journalPath).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null
      throw this.damaged(`the journal cannot be read (${err.code ?? String(err)})`)
    })
    if (body === null) {
      if (journal !== null && journal.length > 0) throw this.damaged('the journal exists but the state file does not (deleted or moved by hand?)')
      return null
    }
    this.hasSnapshot = true
    this.snapshotBytes = (await stat(this.snapshots.path)).size
    const base = body.version === 1 ? fromVersion1(body) : withoutSeq(body)
    const baseSeq = body.version === 1 ? 0 : body.journalSeq
    const state = journal === null ? base : this.replay(base, baseSeq, journal)
    this.seq = Math.max(this.seq, baseSeq)
    const checked = durableStateSchema.safeParse(state)
    if (!checked.success) throw this.damaged(`the state after the journal is invalid: ${checked.error.issues[0]?.message ?? 'invalid'}`)
    return checked.data
  }

  /** Makes `delta` durable; compacts into a snapshot of `full()` instead when the journal has grown. */
  async write(delta: StateDelta, full: () => DurableState, whole = false): Promise<void> {
    if (this.busy) throw new Error('JournaledFileStore: one write at a time')
    this.busy = true
    const limit = Math.max(this.opts.minCompactBytes ?? 1 << 20, this.snapshotBytes)
    const state = whole || this.needsFull || !this.hasSnapshot || this.journal.goodBytes > limit ? full() : null // before any await
    try {
      if (!this.loaded) await this.load() // never append to a journal nobody has checked
      if (state !== null || !this.hasSnapshot) await this.compact(state ?? full())
      else this.append(delta)
      this.needsFull = false
    } catch (err) {
      this.needsFull = true
      this.journal.close()
      throw err
    } finally {
      this.busy = false
    }
  }

  /** Closes the journal file. */
  async close(): Promise<void> {
    this.journal.close()
  }

  private replay(base: DurableState, baseSeq: number, bytes: Buffer): DurableState {
    const { lines, completeBytes } = splitJournal(bytes)
    const builder = new StateBuilder(base)
    let expected = baseSeq + 1
    lines.forEach((line, i) => {
      const decoded = decodeJournalLine(line)
      if ('problem' in decoded) throw this.damaged(`journal line ${i + 1}: ${decoded.problem}`)
      if (decoded.seq < expected) return // already in the snapshot (a compaction stopped half-way)
      if (decoded.seq !== expected) throw this.damaged(`journal line ${i + 1} has seq ${decoded.seq}, expected ${expected}`)
      const delta = stateDeltaSchema.safeParse(decoded.delta)
      if (!delta.success) throw this.damaged(`journal line ${i + 1} is not a valid change: ${delta.error.issues[0]?.message ?? 'invalid'}`)
      builder.apply(delta.data as StateDelta)
      expected += 1
    })
    this.seq = expected - 1
    this.journal.goodBytes = completeBytes
    return builder.build()
  }

  private append(delta: StateDelta): void {
    this.journal.append(this.seq + 1, delta)
    this.seq += 1
  }

  private async compact(state: DurableState): Promise<void> {
    await this.snapshots.save({ ...state, journalSeq: this.seq })
    this.hasSnapshot = true
    this.snapshotBytes = statSync(this.snapshots.path).size
    // A fresh, empty journal replaces the old one atomically; the snapshot already holds its lines.
    this.journal.reset()
  }

  private damaged(problem: string): StateFileError {
    return new StateFileError(this.journalPath, problem, this.snapshots.prevPath, false)
  }
}

function withoutSeq(body: DurableState & { journalSeq: number }): DurableState {
  const { journalSeq: _seq, ...state } = body
  return state
}
