/** Crash-safe file writes: temp file in the same directory, fsync, rename, fsync of the directory. */
import { randomBytes } from 'node:crypto'
import { open, rename, unlink, chmod, mkdir, stat } from 'node:fs/promises'
import { dirname, basename, join } from 'node:path'

/** Flushes a directory entry change (a rename or a new file) to disk. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/** Writes `data` to `path` atomically with `mode`; readers see the old file or the new one, never half. */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o644): Promise<void> {
  const dir = dirname(path)
  const tmp = join(dir, `.${basename(path)}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`)
  // 'wx' + mode at creation: a private key is never readable by others, not even for an instant.
  const handle = await open(tmp, 'wx', mode)
  try {
    await handle.writeFile(data)
    await handle.sync()
  } catch (err) {
    await handle.close()
    await unlink(tmp).catch(() => undefined)
    throw err
  }
  await handle.close()
  try {
    await chmod(tmp, mode) // the umask may have narrowed a public file's mode at creation
    await rename(tmp, path)
  } catch (err) {
    await unlink(tmp).catch(() => undefined)
    throw err
  }
  await fsyncDir(dir)
}

/** Creates `dir` (and parents) if missing and makes it 0700; it holds private keys. */
export async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 })
  await chmod(dir, 0o700)
}

/** True when `path` exists (any type). */
export async function pathExists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw err
  }
}
