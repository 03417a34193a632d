/** The embedded default backend: the journaled file store, loaded at the start (SPEC "Running"). */
import type { X509Certificate } from 'node:crypto'
import type { ParsedCrl } from '../identity/crl.js'
import { assertNotRolledBack, pickStartingCrl } from '../identity/crl-startup.js'
import { SingleServiceHost, startService, type StateBackend } from '../service/service-host.js'
import { SingleEnrollHost } from '../service/enroll-host.js'
import { EnrollFileStore } from '../state/enroll-file-store.js'
import { JournaledFileStore } from '../state/journaled-file-store.js'
import { PushedCrlFile } from './pushed-crl-file.js'
import type { StateStore } from '../state/state-store.js'

/** What the file backend checks the CRL with: the configured file's CRL, its path, and the CA. */
export interface FileBackendCrl {
  readonly crl: ParsedCrl
  readonly path: string
  readonly ca: X509Certificate
}

/**
 * Opens and loads the state in `stateDir`, and the pushed CRL kept there. The controller starts with
 * whichever of `tls.crl` and the pushed copy is newer; a damaged state or pushed copy, or a starting CRL
 * older than the one the state records, stops the start here, before anything is written. `wrap` wraps
 * the store (fault-injection tests).
 */
export async function openFileBackend(stateDir: string, fileCrl: FileBackendCrl, wrap?: (store: StateStore) => StateStore): Promise<StateBackend> {
  const files = new JournaledFileStore(stateDir)
  const store = wrap?.(files) ?? files
  const state = await store.load()
  const pushedFile = new PushedCrlFile(stateDir)
  const pushed = await pushedFile.load(fileCrl.ca)
  const startingCrl = pickStartingCrl(fileCrl.crl, pushed?.crl ?? null)
  assertNotRolledBack(startingCrl.crl, state?.meta.crlNumber ?? undefined, startingCrl.pushed ? pushedFile.path : fileCrl.path)
  return {
    restored: state !== null,
    startingCrl,
    start: (deps) => new SingleServiceHost(startService(deps, store, state), store, pushedFile),
    openEnroll: (parts) => SingleEnrollHost.open(parts, new EnrollFileStore(stateDir)),
  }
}
