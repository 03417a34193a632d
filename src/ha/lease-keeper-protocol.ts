/** The messages between lease-keeper.ts (the controller's thread) and lease-keeper-worker.ts. */
import type { LeaseTiming } from './lease-session.js'

/** To the worker: renew this lease (replacing any other), stop renewing it, or close. */
export type KeeperMessage =
  | { readonly type: 'keep'; readonly leaseId: string; readonly timing: LeaseTiming; readonly stamp: SharedArrayBuffer }
  | { readonly type: 'stop'; readonly leaseId: string }
  | { readonly type: 'close' }

/** From the worker: loaded with its client (a lease is handed over only then), a renewal accepted, the lease gone, or a failed call (leaseId null: the client itself). */
export type WorkerMessage =
  | { readonly type: 'ready' }
  | { readonly type: 'renewed'; readonly leaseId: string }
  | { readonly type: 'gone'; readonly leaseId: string }
  | { readonly type: 'error'; readonly leaseId: string | null; readonly message: string }
