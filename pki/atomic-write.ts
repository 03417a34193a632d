/** Crash-safe file writes: temp file in the same directory, fsync, rename, fsync of the directory. */
import { randomBytes } from 'node:crypto'
import { rename, unlink, chmod, mkdir } from 'node:fs/promises'
import { dirname, basename, join, resolve } from 'node:path'
import { fsyncDir, writeNewFileSynced } from '../src/state/durable-fs.js'

// One implementation of the low-level steps, shared with the controller's state store.
export { fsyncDir, pathExists, writeNewFileSynced } from '../src/state/durable-fs.js'

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

/**
 * Creates `dir` (and missing parents) with mode 0700. A folder that already exists keeps its mode: it is
 * the operator's (e.g. a 1777 /tmp must keep its sticky bit); only folders made here get the toolkit's mode.
 */
export async function ensurePrivateDir(dir: string): Promise<void> {
  const first = await mkdir(dir, { recursive: true, mode: 0o700 })
  if (first === undefined) return
  // Every folder from the first one created down to `dir` is new: 0700 whatever the umask made of it.
  const made = resolve(dir)
  for (let d = made; ; d = dirname(d)) {
    await chmod(d, 0o700)
    if (d === resolve(first) || dirname(d) === d) break
  }
}
