/** `plan-key rotate` and `export-controller`: the files a controller host reads. */
import { readFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { withHistory, writeIndex } from './index-file.js'
import { readPlanKeys, withPki } from './pki-dir.js'
import { newPlanKey, publicJwks, rotatedPlanKeys } from './plan-keys.js'
import { ensurePrivateDir, pathExists, writeFileAtomic } from './atomic-write.js'
import { CONTROLLER_FILES, PKI_FILES, pkiPath } from './layout.js'
import { PkiError } from './errors.js'

/** `plan-key rotate`: a new current Ed25519 key; the previous one stays published until the next rotation. */
export async function rotatePlanKey(dir: string, opts: { now?: Date } = {}): Promise<{ kid: string }> {
  const now = opts.now ?? new Date()
  return withPki(dir, async (index) => {
    const previous = await readPlanKeys(dir)
    const next = rotatedPlanKeys(previous, await newPlanKey())
    await writeFileAtomic(pkiPath(dir, PKI_FILES.planKeys), `${JSON.stringify(next, null, 2)}\n`, 0o600)
    await writeFileAtomic(pkiPath(dir, PKI_FILES.planJwks), `${JSON.stringify(publicJwks(next), null, 2)}\n`)
    await writeIndex(dir, withHistory(index, now, 'plan-key rotate', `current ${next.current}, previous ${previous.current}`))
    return { kid: next.current }
  })
}

/** Options of exportController. */
export interface ExportOptions {
  /** Replace files that already exist in the target directory. */
  readonly force?: boolean
  readonly now?: Date
}

/** `export-controller`: copies ca.pem, server.pem, server-key.pem, crl.pem, plan-keys.json — never the CA key. */
export async function exportController(dir: string, outDir: string, opts: ExportOptions = {}): Promise<string[]> {
  const target = resolve(outDir)
  const now = opts.now ?? new Date()
  return withPki(dir, async (index) => {
    if (!(await pathExists(pkiPath(dir, PKI_FILES.serverCert)))) {
      throw new PkiError(`no server certificate yet; run "pxe-pki server-cert --dns HOST --ip ADDR --dir ${dir}" first`)
    }
    await readPlanKeys(dir) // refuse to ship a damaged plan-key file
    const paths = CONTROLLER_FILES.map((file) => join(target, file))
    if (opts.force !== true) {
      for (const path of paths) {
        if (await pathExists(path)) throw new PkiError(`${path} already exists; export-controller refuses to overwrite it (use --force)`)
      }
    }
    if (resolve(dir) === target) throw new PkiError('export-controller needs a directory other than the PKI directory')
    const contents = await Promise.all(CONTROLLER_FILES.map((file) => readFile(pkiPath(dir, file))))
    if (!(await pathExists(target))) await ensurePrivateDir(target) // an operator's existing folder keeps its mode
    for (const [i, file] of CONTROLLER_FILES.entries()) {
      const secret = file === PKI_FILES.serverKey || file === PKI_FILES.planKeys
      await writeFileAtomic(paths[i]!, contents[i]!, secret ? 0o600 : 0o644)
    }
    await writeIndex(dir, withHistory(index, now, 'export-controller', `to ${target}`))
    return paths
  })
}
