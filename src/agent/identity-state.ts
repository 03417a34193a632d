/**
 * `--state-dir`: an enrolled identity kept on a host that has a disk, in the bundle layout (key.pem 0600,
 * cert.pem, ca.pem, plan-jwks.json), each file replaced atomically, the key first. On start it is used
 * again when it still holds: the name and the CA asked for, the key matching the certificate, not
 * expired (a certificate past two thirds of its lifetime is renewed at once by the agent). Otherwise the
 * node enrolls afresh and overwrites it; a crash between two writes leaves a key and a certificate that
 * do not match, which is read as "nothing usable" and enrolled again.
 */
import { access, constants, mkdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { replaceFileAtomically } from '../state/durable-fs.js'
import { BUNDLE_FILE_NAMES, IdentityError, loadBundle, type NodeIdentity } from './identity.js'
import { sameCertificate } from './enrollment.js'

/** What a state folder held: an identity to use, nothing, or the reason it cannot be used. */
export type StoredIdentity = { readonly identity: NodeIdentity } | { readonly none: true } | { readonly unusable: string }

/** One node's state folder. */
export class IdentityStateDir {
  constructor(readonly dir: string) {}

  /** Reads the stored identity and checks it is `name`'s, under `ca`, and not expired at `nowMs`. */
  async load(name: string, ca: string, nowMs: number = Date.now()): Promise<StoredIdentity> {
    try {
      await stat(join(this.dir, BUNDLE_FILE_NAMES.cert))
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { none: true }
      return { unusable: `cannot read ${this.dir} (${(err as NodeJS.ErrnoException).code ?? 'error'})` }
    }
    let identity: NodeIdentity
    try {
      identity = await loadBundle(this.dir, nowMs)
    } catch (err) {
      if (err instanceof IdentityError) return { unusable: err.message }
      throw err
    }
    if (identity.nodeId !== name) return { unusable: `the stored certificate is ${identity.nodeId}'s, not ${name}'s` }
    if (!sameCertificate(identity.ca, ca)) return { unusable: 'the stored CA is not the CA file' }
    return { identity }
  }

  /** Makes the folder (0700) when missing and checks it can be written: before an enrollment spends a token use. */
  async assertWritable(): Promise<void> {
    try {
      await mkdir(this.dir, { recursive: true, mode: 0o700 })
      await access(this.dir, constants.W_OK)
    } catch (err) {
      throw new IdentityError(`the state folder ${this.dir} cannot be written (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
    }
  }

  /** Writes `identity` (the folder is made 0700 when missing); throws on a write error, leaving each file whole. */
  async save(identity: NodeIdentity): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 })
    const write = (name: string, data: string, mode: number) => replaceFileAtomically(join(this.dir, name), this.dir, data, mode)
    write(BUNDLE_FILE_NAMES.key, identity.key, 0o600)
    write(BUNDLE_FILE_NAMES.cert, identity.cert, 0o644)
    write(BUNDLE_FILE_NAMES.ca, identity.ca, 0o644)
    write(BUNDLE_FILE_NAMES.planJwks, `${JSON.stringify(identity.pinnedKeys.jwks, null, 2)}\n`, 0o644)
  }
}
