/**
 * The append side of a journal beside a snapshot (journal-format.ts gives a line's bytes): the state's own
 * store and the enrollment queue's write their changes through one of these. A line is written at the end
 * of the last complete line and fdatasynced before `append` returns, so a crash can only leave a torn last
 * line; a torn tail found at load is cut off before the next append.
 */
import { closeSync, fdatasyncSync, fstatSync, ftruncateSync, openSync, writeSync } from 'node:fs'
import { basename, dirname } from 'node:path'
import { removeLeftoverTemps, replaceFileAtomically } from './durable-fs.js'
import { encodeJournalLine } from './journal-format.js'

/** One journal file: where its last complete line ends, and its descriptor while open. */
export class JournalFile {
  private fd: number | null = null
  /** Where the last complete line ends (a torn tail beyond it is cut before the next append). */
  goodBytes = 0

  constructor(readonly path: string) {}

  /** Appends line `seq` holding `delta` and syncs it; returns the bytes written. */
  append(seq: number, delta: unknown): number {
    if (this.fd === null) {
      this.fd = openJournal(this.path)
      // Cut a torn tail (a crash mid-append) so the next line starts on a line boundary.
      if (fstatSync(this.fd).size !== this.goodBytes) ftruncateSync(this.fd, this.goodBytes)
    }
    const bytes = Buffer.from(encodeJournalLine(seq, delta), 'utf8')
    for (let done = 0; done < bytes.length; ) done += writeSync(this.fd, bytes, done, bytes.length - done, this.goodBytes + done)
    fdatasyncSync(this.fd)
    this.goodBytes += bytes.length
    return bytes.length
  }

  /** Replaces the journal with an empty one atomically (after a snapshot took its lines). */
  reset(): void {
    this.close()
    const dir = dirname(this.path)
    removeLeftoverTemps(dir, basename(this.path))
    replaceFileAtomically(this.path, dir, '')
    this.goodBytes = 0
  }

  /** Closes the file; the next append opens it again. */
  close(): void {
    const fd = this.fd
    this.fd = null
    if (fd === null) return
    try {
      closeSync(fd)
    } catch {
      // a close that fails leaves nothing to undo: the next append reopens the journal
    }
  }
}

/** Opens the journal for writing, creating it (0600) when it does not exist yet. */
function openJournal(path: string): number {
  try {
    return openSync(path, 'r+')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    return openSync(path, 'w+', 0o600)
  }
}
