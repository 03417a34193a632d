/**
 * `issue`: key pairs and client certificates written as bundle folders, one name or a whole `--names`
 * file in one run. Order of a run, so that no bundle is ever on disk without its certificate in the
 * index (the index is what `list` and `revoke <name>` read): check every name, sign everything in
 * memory, write the index once, then put the bundles in place (all or nothing on an error).
 */
import { readdir, readFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { loadCa } from './ca.js'
import type { LoadedCa } from './ca.js'
import { clientExtensions } from './cert-builder.js'
import { placeBundles, asideName, PlacementError } from './bundle-files.js'
import type { BundleContent, BundlePlacement } from './bundle-files.js'
import { checkReplace, checkWithinCa, clientSubject, DEFAULT_LEAF_DAYS, signLeaf, withCerts } from './leaf.js'
import { checkKeySpec, describeKeySpec, generateKeyPairInPool } from './keys.js'
import type { KeySpec, KeyType } from './keys.js'
import { writeIndex } from './index-file.js'
import type { CertRecord, ClientRole, PkiIndex } from './index-file.js'
import { throwFirstProblem } from './names-file.js'
import type { NameEntry, Problem } from './names-file.js'
import { withPki } from './pki-dir.js'
import { ensurePrivateDir } from './atomic-write.js'
import { PKI_FILES, pkiPath } from './layout.js'
import { checkDays, checkName, checkRole } from './validate.js'
import { PkiError } from './errors.js'

/** Options of issueBundle and issueBundles. */
export interface BundleOptions {
  readonly days?: number
  /** `rsa` (default) or `ec` (P-256). */
  readonly keyType?: KeyType
  /** RSA key size (2048 by default). */
  readonly keyBits?: number
  readonly outDir?: string
  readonly notBefore?: Date
  readonly now?: Date
  /** Issue even if the name holds a valid certificate; an existing bundle folder is moved aside. */
  readonly replace?: boolean
}

/** Options of a batch run. */
export interface BatchOptions extends BundleOptions {
  /** Names the file in error messages and the index history. */
  readonly source?: string
  /** Problems already found in the file (parseNamesFile): reported with the others, first line first. */
  readonly problems?: readonly Problem[]
  /** Called as bundles are signed, then as they are written. */
  readonly onProgress?: (phase: 'signed' | 'written', done: number, total: number) => void
}

/** What was issued for one name. */
export interface IssuedBundle {
  readonly name: string
  readonly bundleDir: string
  readonly serial: string
  /** Serials of the valid certificates this one replaces (they stay valid until revoked). */
  readonly replaces: string[]
  /** Where the replaced bundle folder went, if there was one. */
  readonly movedAside: string | null
}

interface Job extends NameEntry, BundlePlacement {
  readonly replaces: string[]
}

interface Run {
  readonly role: ClientRole
  readonly days: number
  readonly keySpec: KeySpec
  readonly now: Date
  readonly notBefore: Date
  readonly parent: string
  readonly replace: boolean
}

/** Bundles whose keys and signatures are made at once on the thread pool (so a batch uses every core). */
const CHUNK = 50

/** `issue <name>`: a new key and certificate for `name`, written as the bundle folder `<outDir>/<name>/`. */
export async function issueBundle(dir: string, name: string, role: ClientRole, opts: BundleOptions = {}): Promise<IssuedBundle> {
  checkName(name)
  const [issued] = await issueAll(dir, [{ name, line: 0 }], role, opts, null)
  return issued!
}

/** `issue --names FILE`: one bundle per name, in one run under one lock; on any problem nothing is issued. */
export async function issueBundles(dir: string, entries: readonly NameEntry[], role: ClientRole, opts: BatchOptions = {}): Promise<IssuedBundle[]> {
  if (entries.length === 0 && (opts.problems ?? []).length === 0) throw new PkiError(`${opts.source ?? 'the names file'} lists no name`)
  return issueAll(dir, entries, role, opts, opts.source ?? 'the names file')
}

async function issueAll(dir: string, entries: readonly NameEntry[], role: ClientRole, opts: BatchOptions, source: string | null): Promise<IssuedBundle[]> {
  const now = opts.now ?? new Date()
  const run: Run = {
    role: checkRole(role),
    days: checkDays(opts.days ?? DEFAULT_LEAF_DAYS, '--days'),
    keySpec: checkKeySpec(opts.keyType, opts.keyBits),
    now,
    notBefore: opts.notBefore ?? now,
    parent: resolve(opts.outDir ?? pkiPath(dir, PKI_FILES.bundles)),
    replace: opts.replace === true,
  }
  return withPki(dir, async (index) => {
    const jobs = await planJobs(entries, index, run, source, opts.problems ?? [])
    const ca = await loadCa(dir)
    checkWithinCa(ca, run.notBefore, run.days)
    const jwks = await readFile(pkiPath(dir, PKI_FILES.planJwks), 'utf8')
    const signed = await signAll(ca, jobs, run, opts.onProgress)
    const records = signed.map((s) => s.record)
    const contents: BundleContent[] = signed.map((s) => ({ key: s.keyPem, cert: s.certPem, ca: ca.certPem, jwks }))
    await ensurePrivateDir(run.parent) // only a folder made here gets 0700; an existing one keeps its mode
    await writeIndex(dir, withCerts(index, records, 'issue', historyDetail(jobs, records, run, source), now))
    let written = 0
    try {
      await placeBundles(jobs, (i) => contents[i]!, () => opts.onProgress?.('written', ++written, jobs.length))
    } catch (err) {
      throw await undoIndex(dir, index, records, jobs, err, now)
    }
    return jobs.map((job, i) => ({ name: job.name, bundleDir: job.bundleDir, serial: records[i]!.serial, replaces: job.replaces, movedAside: job.aside }))
  })
}

/** Names already present in `parent` (none when it does not exist yet). */
async function existingEntries(parent: string): Promise<Set<string>> {
  try {
    return new Set(await readdir(parent))
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return new Set()
    if (code === 'ENOTDIR') throw new PkiError(`${parent} is not a directory`)
    throw err
  }
}

/** Checks every name against the folder and the index; throws the first problem, before anything is made. */
async function planJobs(entries: readonly NameEntry[], index: PkiIndex, run: Run, source: string | null, known: readonly Problem[]): Promise<Job[]> {
  const existing = await existingEntries(run.parent)
  const problems: Problem[] = [...known]
  const jobs: Job[] = []
  for (const entry of entries) {
    const bundleDir = join(run.parent, entry.name)
    try {
      let aside: string | null = null
      if (existing.has(entry.name)) {
        if (!run.replace) throw new PkiError(`bundle ${bundleDir} already exists; issue refuses to overwrite it (--replace moves it aside)`)
        aside = await asideName(bundleDir)
      }
      const replaces = checkReplace(index, entry.name, run.now, run.replace)
      jobs.push({ ...entry, bundleDir, parent: run.parent, aside, replaces })
    } catch (err) {
      if (!(err instanceof PkiError)) throw err
      problems.push({ line: entry.line, message: err.message, usage: false })
    }
  }
  throwFirstProblem(problems, source)
  return jobs
}

interface Signed {
  readonly keyPem: string
  readonly certPem: string
  readonly record: CertRecord
}

/** Makes every key pair and certificate in memory, a chunk at a time on the thread pool, reporting progress. */
async function signAll(ca: LoadedCa, jobs: readonly Job[], run: Run, onProgress: BatchOptions['onProgress']): Promise<Signed[]> {
  const signed: Signed[] = []
  for (let start = 0; start < jobs.length; start += CHUNK) {
    const chunk = jobs.slice(start, start + CHUNK)
    const done = await Promise.all(chunk.map((job) => signOne(ca, job, run)))
    for (const one of done) {
      signed.push(one)
      onProgress?.('signed', signed.length, jobs.length)
    }
  }
  return signed
}

async function signOne(ca: LoadedCa, job: Job, run: Run): Promise<Signed> {
  const key = await generateKeyPairInPool(run.keySpec)
  const { certPem, record } = await signLeaf(ca, {
    name: job.name, role: run.role, subject: clientSubject(job.name, run.role), spkiDer: key.spkiDer,
    extensions: clientExtensions(run.keySpec.type), days: run.days, notBefore: run.notBefore, command: 'issue', now: run.now, replaces: job.replaces,
  })
  return { keyPem: key.privateKeyPem, certPem, record }
}

function historyDetail(jobs: readonly Job[], records: readonly CertRecord[], run: Run, source: string | null): string {
  const key = describeKeySpec(run.keySpec)
  if (source === null) {
    const job = jobs[0]!
    const replaced = job.replaces.length > 0 ? `; replaces ${job.replaces.join(',')}` : ''
    const aside = job.aside === null ? '' : `; old bundle moved to ${job.aside}`
    return `${run.role} "${job.name}" serial ${records[0]!.serial} (${key}) bundle ${job.bundleDir}${replaced}${aside}`
  }
  const replacing = jobs.filter((j) => j.replaces.length > 0).length
  return `${jobs.length} ${run.role} bundles (${key}) from ${source} into ${run.parent}${replacing > 0 ? `; ${replacing} replace valid certificates` : ''}`
}

/** After a failed placement: the index keeps only certificates whose bundle is still on disk; returns the error to throw. */
async function undoIndex(dir: string, index: PkiIndex, records: readonly CertRecord[], jobs: readonly Job[], err: unknown, now: Date): Promise<unknown> {
  if (!(err instanceof PlacementError)) return err
  const kept = records.filter((_, i) => err.stillPlaced.has(i))
  try {
    await writeIndex(dir, kept.length === 0 ? index : withCerts(index, kept, 'issue', `${kept.length} bundles left in place after an error`, now))
  } catch {
    return new PkiError(`${err.message}; the index still lists all ${records.length} new certificates, of which only ${kept.length} have a bundle: revoke the others by serial ("pxe-pki list")`)
  }
  if (kept.length === 0) return new PkiError(`${err.message}; nothing was issued`)
  return new PkiError(`${err.message}; ${kept.length} bundles could not be taken out again and stay issued (first: ${jobs[[...err.stillPlaced][0]!]!.bundleDir})`)
}
