/**
 * One checksummed snapshot file (see state-file-format.ts) in the state directory: the journaled file
 * store keeps its `state.json` in one.
 *
 * save(): write `<file>.tmp-<random>` (0600) and fsync it, keep the current good file as `<file>.prev`,
 * rename the temp file over `<file>`, fsync the directory. A crash at any point leaves either the old
 * or the new file whole. load() never modifies, deletes or replaces a damaged file: it throws
 * StateFileError, also when the file is gone but `<file>.prev` is there. One store (one process) per directory: leftover temp files are deleted on the first save.
 */
import { mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { z } from 'zod'
import { keepCopy, pathExists, removeLeftoverTemps, replaceFileAtomically } from './durable-fs.js'
import { StateFileError } from './state-file-error.js'
import { decodeStateFile, encodeStateFile } from './state-file-format.js'

/** Loads and saves one snapshot of type T. */
export interface SnapshotStore<T> {
  /** The saved snapshot, or null when there is none yet (a first start); throws on a damaged store. */
  load(): Promise<T | null>
  /** Replaces the snapshot atomically and durably. */
  save(value: T): Promise<void>
  /** Releases the store. */
  close?(): Promise<void>
}

/** Options of SnapshotFile. */
export interface SnapshotFileOptions {
  /** The file name inside the directory (default `state.json`). */
  fileName?: string
  /** Validate values on save too (default true); loads are always validated. */
  validateOnSave?: boolean
}

/** A SnapshotStore keeping one JSON snapshot, validated by `schema`, in `dir` (created 0700 if missing). */
export class SnapshotFile<T> implements SnapshotStore<T> {
  /** The state file. */
  readonly path: string
  /** The previous good copy, kept beside it. */
  readonly prevPath: string
  private readonly fileName: string
  private readonly validateOnSave: boolean
  private verified = false // the file on disk is known good (loaded or written by us) or absent
  private cleaned = false
  private closed = false

  constructor(
    readonly dir: string,
    private readonly schema: z.ZodType<T>,
    opts: SnapshotFileOptions = {},
  ) {
    this.fileName = opts.fileName ?? 'state.json'
    this.validateOnSave = opts.validateOnSave ?? true
    if (this.fileName === '' || /[/\\]/.test(this.fileName)) throw new TypeError(`bad state file name: ${this.fileName}`)
    this.path = join(dir, this.fileName)
    this.prevPath = `${this.path}.prev`
  }

  /** The saved snapshot, null if there is none; throws StateFileError if the file cannot be used. */
  async load(): Promise<T | null> {
    const value = this.readVerified()
    this.verified = true
    return value
  }

  /**
   * Saves durably; resolves once the value is on disk. Rejects a value the schema refuses. The file
   * steps run synchronously (see durable-fs.ts): the value is on disk when this returns, so two saves
   * never race and there is nothing to coalesce.
   */
  save(value: T): Promise<void> {
    try {
      this.saveNow(value)
      return Promise.resolve()
    } catch (err) {
      return Promise.reject(err)
    }
  }

  /** Further saves reject. */
  async close(): Promise<void> {
    this.closed = true
  }

  private saveNow(value: T): void {
    if (this.closed) throw new Error(`state store ${this.path} is closed`)
    const checked = this.validateOnSave ? this.schema.safeParse(value) : { success: true as const }
    if (!checked.success) throw new TypeError(`refusing to save state that does not match its schema: ${describeIssues(checked.error)}`)
    const text = encodeStateFile(value)
    mkdirSync(this.dir, { recursive: true, mode: 0o700 })
    if (!this.cleaned) {
      removeLeftoverTemps(this.dir, this.fileName)
      this.cleaned = true
    }
    // never replace a file nobody has verified: it may be the damaged file a failed load left alone
    if (!this.verified) {
      this.readVerified()
      this.verified = true
    }
    replaceFileAtomically(this.path, this.dir, text, 0o600, () => keepCopy(this.path, this.prevPath))
  }

  private readVerified(): T | null {
    let bytes: Buffer
    try {
      bytes = readFileSync(this.path)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'ENOENT') {
        // Our writes never remove the file once it exists, so a lone .prev means someone deleted or
        // moved it: starting empty would send the generation back to 0 and later overwrite .prev.
        if (pathExists(this.prevPath)) throw this.error('it is missing, but its previous copy exists (deleted or moved by hand?)')
        return null
      }
      throw this.error(`it cannot be read (${code ?? String(err)})`)
    }
    const decoded = decodeStateFile(bytes)
    if ('problem' in decoded) throw this.error(decoded.problem)
    const parsed = this.schema.safeParse(decoded.body)
    if (!parsed.success) throw this.error(`its content does not match the state schema: ${describeIssues(parsed.error)}`)
    return parsed.data
  }

  private error(problem: string): StateFileError {
    // Only for the message: a .prev we cannot even stat counts as absent.
    let prevExists = false
    try {
      prevExists = pathExists(this.prevPath)
    } catch {
      // unreadable: reported as absent
    }
    return new StateFileError(this.path, problem, this.prevPath, prevExists)
  }
}

/** The first few zod issues as `path: message`, without echoing values. */
function describeIssues(error: z.ZodError): string {
  const shown = error.issues.slice(0, 3).map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`)
  const more = error.issues.length > 3 ? ` (and ${error.issues.length - 3} more)` : ''
  return shown.join('; ') + more
}
