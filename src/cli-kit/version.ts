/**
 * `<bin> --version`: the version of the installed package, read from its package.json at run time.
 * The file is found by walking up from this module: ../../package.json from src/cli-kit/ in a clone
 * (run through tsx), ../../../package.json from dist/src/cli-kit/ in a clone or an installed tarball.
 * Reading it (not a constant baked in at build time) keeps the version one fact, in package.json.
 */
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { z } from 'zod'

/** The package whose version the bins print (package.json's "name"). */
export const PACKAGE_NAME = 'discord-pxe-controller'

// Loose on purpose: package.json holds many keys this reader has no business with; only these two are read.
const manifestSchema = z.looseObject({ name: z.string(), version: z.string().regex(/^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?$/) })

/** The package's version (e.g. 0.1.0); throws naming the folder searched when no package.json of this package is above `from`. */
export function packageVersion(from: string = fileURLToPath(import.meta.url)): string {
  let dir = dirname(from)
  for (;;) {
    const version = manifestVersion(join(dir, 'package.json'))
    if (version !== null) return version
    const parent = dirname(dir)
    if (parent === dir) throw new Error(`no package.json of ${PACKAGE_NAME} above ${dirname(from)}`)
    dir = parent
  }
}

/** The version in `path` when it is this package's manifest; null when the file is missing or another package's. */
function manifestVersion(path: string): string | null {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw new Error(`cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return null // another project's broken file on the way up is none of ours
  }
  if (typeof json !== 'object' || json === null || (json as { name?: unknown }).name !== PACKAGE_NAME) return null
  const manifest = manifestSchema.safeParse(json)
  if (!manifest.success) throw new Error(`${path}: "version" is not a semantic version`)
  return manifest.data.version
}

/** What `--version` prints: `pxe-ctl 0.1.0`. */
export function versionLine(bin: string): string {
  return `${bin} ${packageVersion()}`
}
