/** The exclusive lock of a PKI directory, so two CLI runs never interleave their writes. */
import { open, readFile, stat, unlink } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { join } from 'node:path'
import { PKI_FILES } from './layout.js'
import { PkiError } from './errors.js'

/** How long a second run waits for the lock before it gives up, by default. */
export const DEFAULT_LOCK_WAIT_MS = 5000
const POLL_MS = 50
const UNREADABLE_LOCK_STALE_MS = 30_000

function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    // EPERM: the process exists but belongs to someone else; it still holds the lock.
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

async function readHolder(lockPath: string): Promise<number | null> {
  try {
    const pid = Number.parseInt((await readFile(lockPath, 'utf8')).trim(), 10)
    return Number.isSafeInteger(pid) && pid > 0 ? pid : null
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw err
  }
}

/** True when the lock file names no pid and is older than any run's first write could take. */
async function unreadableAndOld(lockPath: string): Promise<boolean> {
  try {
    return Date.now() - (await stat(lockPath)).mtimeMs > UNREADABLE_LOCK_STALE_MS
  } catch {
    return false
  }
}

/** Tries once to create the lock file; false when someone else holds it. */
async function tryAcquire(lockPath: string): Promise<boolean> {
  try {
    const handle = await open(lockPath, 'wx', 0o600)
    await handle.writeFile(`${process.pid}\n`)
    await handle.close()
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw err
  }
}

/** Runs `fn` holding `<dir>/.lock`; waits up to `waitMs`, takes over the lock of a dead process. */
export async function withPkiLock<T>(dir: string, fn: () => Promise<T>, waitMs = DEFAULT_LOCK_WAIT_MS): Promise<T> {
  const lockPath = join(dir, PKI_FILES.lock)
  const deadline = Date.now() + waitMs
  for (;;) {
    if (await tryAcquire(lockPath)) break
    const holder = await readHolder(lockPath)
    if (holder === null && (await unreadableAndOld(lockPath))) {
      await unlink(lockPath).catch(() => undefined) // a run died between creating the file and writing its pid
      continue
    }
    if (holder !== null && !processIsAlive(holder)) {
      // A crashed run left its lock behind. Re-read right before removing it to narrow the race
      // with another run that takes the same stale lock over at the same moment.
      if ((await readHolder(lockPath)) === holder) await unlink(lockPath).catch(() => undefined)
      continue
    }
    if (Date.now() >= deadline) {
      const who = holder === null ? 'unknown pid' : `pid ${holder}`
      throw new PkiError(`another pxe-pki command holds ${lockPath} (${who}); try again when it has finished`)
    }
    await sleep(POLL_MS)
  }
  try {
    return await fn()
  } finally {
    await unlink(lockPath).catch(() => undefined)
  }
}
