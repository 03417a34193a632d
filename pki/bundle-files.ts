/**
 * Bundle folders on disk: each is written in a temp folder beside its target (0700, every file fsynced)
 * and renamed into place in one step, so a reader sees a whole bundle or none. A bundle replaced with
 * `--replace` is first moved aside to `<name>.replaced-<serial>`, never deleted.
 */
import { X509Certificate } from 'node:crypto'
import { chmod, mkdtemp, readFile, rename, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { fsyncDir, pathExists, writeNewFileSynced } from './atomic-write.js'
import { BUNDLE_FILES } from './layout.js'
import { PkiError } from './errors.js'

/** The four files of a bundle, in memory. */
export interface BundleContent {
  readonly key: string
  readonly cert: string
  readonly ca: string
  readonly jwks: string
}

/** Where one bundle goes, and where the bundle it replaces goes first (if any). */
export interface BundlePlacement {
  readonly bundleDir: string
  readonly parent: string
  readonly aside: string | null
}

/** How many bundles are written at once: enough to keep the disk's queue busy on a small machine. */
const WRITE_CONCURRENCY = 16

/** The name an existing bundle folder is moved to by `--replace`: `<dir>.replaced-<serial of its cert.pem>`. */
export async function asideName(bundleDir: string): Promise<string> {
  let serial: string
  try {
    serial = new X509Certificate(await readFile(join(bundleDir, BUNDLE_FILES.cert))).serialNumber.toLowerCase()
  } catch {
    throw new PkiError(`${bundleDir} holds no readable cert.pem; move it away yourself, then run issue again`)
  }
  const aside = `${bundleDir}.replaced-${serial}`
  if (await pathExists(aside)) throw new PkiError(`${bundleDir} would be moved aside to ${aside}, which already exists; move one of them away first`)
  return aside
}

async function writeBundleFile(dir: string, file: string, data: string, mode: number): Promise<void> {
  const path = join(dir, file)
  await writeNewFileSynced(path, data, mode)
  await chmod(path, mode) // the umask may have narrowed a public file's mode at creation
}

/** Writes the bundle into a fresh 0700 temp folder in `parent`; returns its path. */
async function stage(parent: string, content: BundleContent): Promise<string> {
  const tmp = await mkdtemp(join(parent, '.bundle-tmp-')) // mkdtemp makes it 0700
  try {
    await Promise.all([
      writeBundleFile(tmp, BUNDLE_FILES.key, content.key, 0o600),
      writeBundleFile(tmp, BUNDLE_FILES.cert, content.cert, 0o644),
      writeBundleFile(tmp, BUNDLE_FILES.ca, content.ca, 0o644),
      writeBundleFile(tmp, BUNDLE_FILES.planJwks, content.jwks, 0o644),
    ])
    await fsyncDir(tmp)
    return tmp
  } catch (err) {
    await rm(tmp, { recursive: true, force: true })
    throw err
  }
}

/** Stages one bundle, moves the one it replaces aside, and renames the new one into place. */
async function place(target: BundlePlacement, content: BundleContent): Promise<void> {
  const tmp = await stage(target.parent, content)
  try {
    if (target.aside !== null) await rename(target.bundleDir, target.aside)
    try {
      await rename(tmp, target.bundleDir)
    } catch (err) {
      if (target.aside !== null) await rename(target.aside, target.bundleDir)
      throw err
    }
  } catch (err) {
    await rm(tmp, { recursive: true, force: true })
    throw err
  }
}

/** Takes a placed bundle back out (error path): removes it and moves the replaced one back. */
async function unplace(target: BundlePlacement): Promise<void> {
  await rm(target.bundleDir, { recursive: true, force: true })
  if (target.aside !== null) await rename(target.aside, target.bundleDir)
}

/** A bundle could not be written; `stillPlaced` lists the bundles (by index) that could not be taken out again. */
export class PlacementError extends PkiError {
  constructor(message: string, readonly stillPlaced: ReadonlySet<number>) {
    super(message)
    this.name = 'PlacementError'
  }
}

function reason(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err))
}

/**
 * Puts every bundle in place, `WRITE_CONCURRENCY` at a time, reporting each one written. All or nothing:
 * on an error the bundles already placed are taken out again (replaced ones moved back), then a
 * PlacementError says which could not be.
 */
export async function placeBundles(
  targets: readonly BundlePlacement[],
  contentOf: (i: number) => BundleContent,
  onWritten: () => void,
): Promise<void> {
  const placed: number[] = []
  let next = 0
  let failure: { at: number; err: unknown } | undefined
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < targets.length) {
      const i = next++
      try {
        await place(targets[i]!, contentOf(i))
        placed.push(i)
        onWritten()
      } catch (err) {
        failure ??= { at: i, err }
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(WRITE_CONCURRENCY, targets.length) }, worker))
  if (failure !== undefined) {
    const stillPlaced = new Set<number>()
    for (const i of placed.reverse()) await unplace(targets[i]!).catch(() => stillPlaced.add(i))
    throw new PlacementError(`cannot write bundle ${targets[failure.at]!.bundleDir} (${reason(failure.err)})`, stillPlaced)
  }
  for (const parent of new Set(targets.map((t) => t.parent))) await fsyncDir(parent)
}
