/** Where a CRL pushed by an operator (POST /v1/crl) is kept, so that a restart and every HA replica find it. */
import type { ParsedCrl } from '../identity/crl.js'

/** What `save` must still find stored (HA: the etcd key's mod revision); opaque to the caller. */
export type PushedCrlVersion = string | null

/** The file store's copy in `state_dir`, or (HA) the cluster's copy in etcd. */
export interface PushedCrlStore {
  /**
   * Called before a push is judged: brings the CRL in force up to the stored copy (HA: a copy another
   * replica wrote is offered by the usual rules) and says which version `save` must find unchanged.
   * Throws AppError when this replica may not take a push (HA: not the leader).
   */
  prepare(): Promise<PushedCrlVersion>
  /** Stores `crl` durably unless the stored copy moved since `prepare`; throws AppError 503 when it cannot. */
  save(crl: ParsedCrl, version: PushedCrlVersion): Promise<void>
  /** HA: starts following the cluster's copy; called once the CRL side acts on new CRLs. */
  follow?(): void
  /**
   * HA: the push that saved `pem` could not install it here (e.g. the TLS context was refused): the
   * cluster's copy is to be offered again by the usual watch, not taken as already in force.
   */
  notInstalled?(pem: string): void
}
