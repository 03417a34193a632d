/** Small crash-safe file steps used by the file state store and the PKI toolkit (Linux/macOS semantics). */
import { randomBytes } from 'node:crypto'
import { constants } from 'node:fs'
import { join } from 'node:path'
import { copyFile, link, open, readdir, rename, stat, unlink } from 'node:fs/promises'

/** A unique sibling name for a temporary file (CSPRNG suffix, so concurrent writers never collide). */
export function tempName(path: string, tag: string): string {
  return `${path}.${tag}-${randomBytes(8).toString('hex')}`
}

/** Creates `path` exclusively with `mode` (set at creation: never readable by others, not even for an instant), writes `data` and fsyncs it. */
export async function writeNewFileSynced(path: string, data: string | Uint8Array, mode = 0o600): Promise<void> {
  const fh = await open(path, 'wx', mode)
  try {
    await fh.writeFile(data)
    await fh.sync()
  } finally {
    await fh.close()
  }
}

/**
 * Replaces `path` atomically with `data`: a new temp file created with `mode` and fsynced, then
 * `beforeRename` (e.g. keeping the previous copy), the rename over `path`, and an fsync of `dir`
 * (its parent). On failure the temp file is removed and `path` is left as it was.
 */
export async function replaceFileAtomically(path: string, dir: string, data: string | Uint8Array, mode = 0o600, beforeRename?: () => Promise<unknown>): Promise<void> {
  const tmp = tempName(path, 'tmp')
  try {
    await writeNewFileSynced(tmp, data, mode)
    await beforeRename?.()
    await rename(tmp, path)
  } catch (err) {
    await unlink(tmp).catch(() => undefined)
    throw err
  }
  await fsyncDir(dir)
}

/** True when `path` exists (any type); errors other than ENOENT are thrown. */
export async function pathExists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw err
  }
}

/** Fsyncs a directory so renames inside it are durable; a no-op where directories cannot be fsynced. */
export async function fsyncDir(dir: string): Promise<void> {
  let fh
  try {
    fh = await open(dir, constants.O_RDONLY)
    await fh.sync()
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code !== 'EISDIR' && code !== 'EPERM' && code !== 'EINVAL') throw err
  } finally {
    await fh?.close()
  }
}

/**
 * Atomically makes `copyPath` hold what `path` holds now (a hard link, or a synced copy where links
 * are unsupported). Returns false when `path` does not exist.
 */
export async function keepCopy(path: string, copyPath: string): Promise<boolean> {
  const tmp = tempName(copyPath, 'tmp')
  try {
    await link(path, tmp)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return false
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'EXDEV' && code !== 'EMLINK') throw err
    await copyFile(path, tmp, constants.COPYFILE_EXCL)
    const fh = await open(tmp, 'r+')
    try {
      await fh.chmod(0o600)
      await fh.sync()
    } finally {
      await fh.close()
    }
  }
  await rename(tmp, copyPath)
  return true
}

/** Deletes leftovers of interrupted writes: files in `dir` named `<base>.tmp-*` or `<base>.prev.tmp-*`. */
export async function removeLeftoverTemps(dir: string, base: string): Promise<void> {
  for (const name of await readdir(dir)) {
    if (name.startsWith(`${base}.tmp-`) || name.startsWith(`${base}.prev.tmp-`)) {
      await unlink(join(dir, name)).catch(() => undefined)
    }
  }
}
