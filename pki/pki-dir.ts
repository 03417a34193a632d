/** Opening a PKI directory for a command: it must exist and hold our index; writers hold the lock. */
import { stat, readFile } from 'node:fs/promises'
import { readIndex } from './index-file.js'
import type { PkiIndex } from './index-file.js'
import { withPkiLock } from './lock.js'
import { PKI_FILES, pkiPath } from './layout.js'
import { planKeyPairProblem, planKeysFileSchema } from './plan-keys.js'
import type { PlanKeysFile } from './plan-keys.js'
import { PkiError } from './errors.js'

/** Refuses a path that does not exist or is not a directory. */
export async function assertPkiDirExists(dir: string): Promise<void> {
  let isDir: boolean
  try {
    isDir = (await stat(dir)).isDirectory()
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new PkiError(`PKI directory ${dir} does not exist; create it with "pxe-pki init --dir ${dir}"`)
    }
    throw err
  }
  if (!isDir) throw new PkiError(`${dir} is not a directory`)
}

/** Reads the index of an existing PKI without the lock (for read-only commands). */
export async function readPki(dir: string): Promise<PkiIndex> {
  await assertPkiDirExists(dir)
  return readIndex(dir)
}

/** Runs `fn` under the PKI lock with the current index; `fn` validates, then writes. */
export async function withPki<T>(dir: string, fn: (index: PkiIndex) => Promise<T>): Promise<T> {
  await assertPkiDirExists(dir)
  await readIndex(dir) // a foreign directory is refused before any lock file is created in it
  return withPkiLock(dir, async () => fn(await readIndex(dir)))
}

/** Reads and validates plan-keys.json. */
export async function readPlanKeys(dir: string): Promise<PlanKeysFile> {
  const path = pkiPath(dir, PKI_FILES.planKeys)
  let json: unknown
  try {
    json = JSON.parse(await readFile(path, 'utf8'))
  } catch {
    throw new PkiError(`${path} is missing or not JSON`)
  }
  const parsed = planKeysFileSchema.safeParse(json)
  if (!parsed.success) throw new PkiError(`${path} is not a valid plan-key file`)
  const mismatch = planKeyPairProblem(parsed.data, path)
  if (mismatch !== null) throw new PkiError(mismatch)
  return parsed.data
}
