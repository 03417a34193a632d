/**
 * Small crash-safe file steps used by the file state store and the PKI toolkit (Linux/macOS semantics).
 *
 * They are synchronous on purpose. The controller has one thread, and under a reconnect storm one turn of
 * its event loop lasts as long as the handshakes admission lets in (up to ~3 s of work): an asynchronous
 * file step waits a whole turn for its callback, and a durable write is 2–15 such steps: in a 10,000-node
 * cold join the round that first appended to the journal (open, stat, write, fdatasync of a 630-byte line)
 * held every answer waiting for it 16 s, the write alone 3 s. Done synchronously the
 * same steps cost what the disk costs (here: an append and fdatasync 0.25 ms, a 5 MiB snapshot 12 ms).
 * The price is that a disk that stalls stalls the process too, as Redis's `appendfsync always` does; an
 * asynchronous write would have held every state-changing answer just the same.
 */
import { randomBytes } from 'node:crypto'
import { closeSync, constants, copyFileSync, fchmodSync, fsyncSync, linkSync, openSync, readdirSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** A unique sibling name for a temporary file (CSPRNG suffix, so concurrent writers never collide). */
export function tempName(path: string, tag: string): string {
  return `${path}.${tag}-${randomBytes(8).toString('hex')}`
}

/** Creates `path` exclusively with `mode` (set at creation: never readable by others, not even for an instant), writes `data` and fsyncs it. */
export function writeNewFileSynced(path: string, data: string | Uint8Array, mode = 0o600): void {
  const fd = openSync(path, 'wx', mode)
  try {
    writeFileSync(fd, data)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/**
 * Replaces `path` atomically with `data`: a new temp file created with `mode` and fsynced, then
 * `beforeRename` (e.g. keeping the previous copy), the rename over `path`, and an fsync of `dir`
 * (its parent). On failure the temp file is removed and `path` is left as it was.
 */
export function replaceFileAtomically(path: string, dir: string, data: string | Uint8Array, mode = 0o600, beforeRename?: () => unknown): void {
  const tmp = tempName(path, 'tmp')
  try {
    writeNewFileSynced(tmp, data, mode)
    beforeRename?.()
    renameSync(tmp, path)
  } catch (err) {
    try {
      unlinkSync(tmp)
    } catch {
      // already gone, or never created
    }
    throw err
  }
  fsyncDir(dir)
}

/** True when `path` exists (any type); errors other than ENOENT are thrown. */
export function pathExists(path: string): boolean {
  try {
    statSync(path)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw err
  }
}

/** Fsyncs a directory so renames inside it are durable; a no-op where directories cannot be fsynced. */
export function fsyncDir(dir: string): void {
  let fd: number | undefined
  try {
    fd = openSync(dir, constants.O_RDONLY)
    fsyncSync(fd)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code !== 'EISDIR' && code !== 'EPERM' && code !== 'EINVAL') throw err
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

/**
 * Atomically makes `copyPath` hold what `path` holds now (a hard link, or a synced copy where links
 * are unsupported). Returns false when `path` does not exist.
 */
export function keepCopy(path: string, copyPath: string): boolean {
  const tmp = tempName(copyPath, 'tmp')
  try {
    linkSync(path, tmp)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return false
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'EXDEV' && code !== 'EMLINK') throw err
    copyFileSync(path, tmp, constants.COPYFILE_EXCL)
    const fd = openSync(tmp, 'r+')
    try {
      fchmodSync(fd, 0o600)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
  }
  renameSync(tmp, copyPath)
  return true
}

/** Deletes leftovers of interrupted writes: files in `dir` named `<base>.tmp-*` or `<base>.prev.tmp-*`. */
export function removeLeftoverTemps(dir: string, base: string): void {
  for (const name of readdirSync(dir)) {
    if (name.startsWith(`${base}.tmp-`) || name.startsWith(`${base}.prev.tmp-`)) {
      try {
        unlinkSync(join(dir, name))
      } catch {
        // gone already: nothing to clean
      }
    }
  }
}
