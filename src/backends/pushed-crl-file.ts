/**
 * The pushed CRL of a controller on the file store: `<state_dir>/pushed-crl.pem`, written atomically
 * (temp file, fsync, rename, directory fsync). It is only ever replaced by a CRL that won against the one
 * in force, so it never goes back; a start loads it or the `tls.crl` file, whichever is newer.
 */
import { mkdir, readFile } from 'node:fs/promises'
import type { X509Certificate } from 'node:crypto'
import { join } from 'node:path'
import { parseVerifiedCrl, type ParsedCrl } from '../identity/crl.js'
import { replaceFileAtomically } from '../state/durable-fs.js'
import type { PushedCrlStore, PushedCrlVersion } from '../service/pushed-crl-store.js'

/** The file's name in `state_dir`. */
export const PUSHED_CRL_FILE = 'pushed-crl.pem'

/** The pushed CRL's copy in the state directory (one process per directory, as the state store). */
export class PushedCrlFile implements PushedCrlStore {
  readonly path: string

  constructor(private readonly dir: string) {
    this.path = join(dir, PUSHED_CRL_FILE)
  }

  /**
   * The stored copy verified under `ca`, or null when nothing was ever pushed. A copy that is not a CRL of
   * this CA stops the start (as a damaged state file does) with what to do.
   */
  async load(ca: X509Certificate): Promise<{ crl: ParsedCrl; pem: string } | null> {
    let pem: string
    try {
      pem = await readFile(this.path, 'utf8')
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
      throw new Error(`key "state_dir": cannot read ${this.path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
    }
    try {
      return { crl: parseVerifiedCrl(pem, ca), pem }
    } catch (err) {
      throw new Error(
        `key "state_dir": ${this.path} (the last CRL pushed with POST /v1/crl) is not a CRL signed by the configured CA (${(err as Error).message}). ` +
          'Put the newest CRL in "tls.crl", remove that file and start again; nothing was changed.',
      )
    }
  }

  /** Nothing to catch up on: this process is the only writer, so the CRL in force is never older than the copy. */
  async prepare(): Promise<PushedCrlVersion> {
    return null
  }

  async save(crl: ParsedCrl): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 })
    replaceFileAtomically(this.path, this.dir, crl.pem, 0o600)
  }
}
