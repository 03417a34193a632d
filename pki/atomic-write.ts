/** Crash-safe file writes: temp file in the same directory, fsync, rename, fsync of the directory. */
import { randomBytes } from 'node:crypto'
import { rename, unlink, chmod, mkdir } from 'node:fs/promises'
import { dirname, basename, join } from 'node:path'
import { fsyncDir, writeNewFileSynced } from '../src/state/durable-fs.js'

// One implementation of the low-level steps, shared with the controller's state store.
export { fsyncDir, pathExists } from '../src/state/durable-fs.js'

/** Writes `data` to `path` atomically with `mode`; readers see the old file or the new one, never half. */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o644): Promise<void> {
  const dir = dirname(path)
  const tmp = join(dir, `.${basename(path)}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`)
  try {
    await writeNewFileSynced(tmp, data, mode)
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
