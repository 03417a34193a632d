/** `init`: a new PKI directory with its CA, an empty CRL and the first plan key. */
import { readdir, rm, stat } from 'node:fs/promises'
import { caFromPem, createCa, DEFAULT_CA_DAYS } from './ca.js'
import { buildCrl, DEFAULT_CRL_DAYS } from './crl.js'
import { addDays } from './cert-builder.js'
import { emptyIndex, withHistory, writeIndex } from './index-file.js'
import { withPkiLock } from './lock.js'
import { newPlanKey, publicJwks, rotatedPlanKeys } from './plan-keys.js'
import { ensurePrivateDir, writeFileAtomic } from './atomic-write.js'
import { PKI_FILES, pkiPath } from './layout.js'
import { checkDays } from './validate.js'
import { PkiError } from './errors.js'

/** Options of initPki. */
export interface InitOptions {
  readonly caDays?: number
  readonly now?: Date
}

/** Refuses a directory that already has content: init never overwrites anything. */
async function assertEmptyOrMissing(dir: string, ignore: readonly string[] = []): Promise<void> {
  let entries: string[]
  try {
    if (!(await stat(dir)).isDirectory()) throw new PkiError(`${dir} exists and is not a directory`)
    entries = (await readdir(dir)).filter((e) => !ignore.includes(e))
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return
    throw err
  }
  if (entries.includes(PKI_FILES.index)) throw new PkiError(`${dir} already holds a PKI; init refuses to overwrite it`)
  if (entries.length > 0) throw new PkiError(`${dir} is not empty; init only creates a PKI in a new or empty directory`)
}

/** Refuses an existing folder that others may write to: they could replace the CA certificate or the CRL. */
async function assertNotShared(dir: string): Promise<void> {
  const mode = await stat(dir).then((st) => st.mode & 0o7777, () => null)
  if (mode !== null && (mode & 0o022) !== 0) {
    throw new PkiError(`${dir} is writable by group or others (mode ${mode.toString(8)}); use a new directory or "chmod 700" this one (init does not change the mode of a folder it did not create)`)
  }
}

/** Creates the PKI in `dir` (0700): CA (RSA 3072, key 0600), CRL number 1, first plan key, index. */
export async function initPki(dir: string, opts: InitOptions = {}): Promise<void> {
  const caDays = checkDays(opts.caDays ?? DEFAULT_CA_DAYS, '--ca-days')
  const now = opts.now ?? new Date()
  await assertEmptyOrMissing(dir)
  await assertNotShared(dir)
  await ensurePrivateDir(dir)
  await withPkiLock(dir, async () => {
    await assertEmptyOrMissing(dir, [PKI_FILES.lock])
    try {
      await writeNewPki(dir, caDays, now)
    } catch (err) {
      // Leave the directory as empty as we found it, so init can simply be run again.
      for (const entry of await readdir(dir)) {
        if (entry !== PKI_FILES.lock) await rm(pkiPath(dir, entry), { recursive: true, force: true })
      }
      throw err
    }
  })
}

async function writeNewPki(dir: string, caDays: number, now: Date): Promise<void> {
  const ca = await createCa(now, caDays)
  const loaded = caFromPem(ca.certPem, ca.keyPem)
  const crlPem = await buildCrl(loaded, { crlNumber: 1, thisUpdate: ca.notBefore, nextUpdate: addDays(ca.notBefore, DEFAULT_CRL_DAYS), entries: [] })
  const planKeys = rotatedPlanKeys(null, await newPlanKey())
  await writeFileAtomic(pkiPath(dir, PKI_FILES.caKey), ca.keyPem, 0o600)
  await writeFileAtomic(pkiPath(dir, PKI_FILES.caCert), ca.certPem)
  await writeFileAtomic(pkiPath(dir, PKI_FILES.crl), crlPem)
  await writeFileAtomic(pkiPath(dir, PKI_FILES.planKeys), `${JSON.stringify(planKeys, null, 2)}\n`, 0o600)
  await writeFileAtomic(pkiPath(dir, PKI_FILES.planJwks), `${JSON.stringify(publicJwks(planKeys), null, 2)}\n`)
  await ensurePrivateDir(pkiPath(dir, PKI_FILES.bundles))
  const record = {
    serial: ca.serial,
    name: ca.name,
    role: 'ca' as const,
    not_before: ca.notBefore.toISOString(),
    not_after: ca.notAfter.toISOString(),
    command: 'init',
    issued_at: now.toISOString(),
  }
  const index = { ...emptyIndex(now), crl_number: 1, certs: [record] }
  // The index is written last: its presence is what marks the directory as a complete PKI.
  await writeIndex(dir, withHistory(index, now, 'init', `CA "${ca.name}" serial ${ca.serial}, CRL 1, plan key ${planKeys.current}`))
}
