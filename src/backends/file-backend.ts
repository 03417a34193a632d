/** The embedded default backend: the journaled file store, loaded at the start (SPEC "Running"). */
import type { ParsedCrl } from '../identity/crl.js'
import { assertNotRolledBack } from '../identity/crl-startup.js'
import { SingleServiceHost, startService, type StateBackend } from '../service/service-host.js'
import { JournaledFileStore } from '../state/journaled-file-store.js'
import type { StateStore } from '../state/state-store.js'

/**
 * Opens and loads the state in `stateDir`. A damaged state, or a CRL older than the one the state records,
 * stops the start here, before anything is written. `wrap` wraps the store (fault-injection tests).
 */
export async function openFileBackend(stateDir: string, crl: ParsedCrl, crlPath: string, wrap?: (store: StateStore) => StateStore): Promise<StateBackend> {
  const files = new JournaledFileStore(stateDir)
  const store = wrap?.(files) ?? files
  const state = await store.load()
  assertNotRolledBack(crl, state?.meta.crlNumber ?? undefined, crlPath)
  return { restored: state !== null, start: (deps) => new SingleServiceHost(startService(deps, store, state), store) }
}
