/** Errors of the etcd state store that the HA runtime acts on (audit, step down, refuse to start). */
import type { Fence } from './leader-election.js'

/** etcd refused a write guarded by `fence`: another replica may lead now. Nothing of that transaction applied. */
export class FencedWriteRefused extends Error {
  override readonly name = 'FencedWriteRefused'
  constructor(
    readonly fence: Fence,
    /** etcd's revision when it refused. */
    readonly revision: string,
    /** Transactions of the same logical write that committed (it was split): before the refusal, or beside it in flight. */
    readonly committedTransactions: number,
  ) {
    super(`etcd refused a state write guarded by election key ${fence.key}: this replica no longer leads`)
  }
}

/** This replica's term ended (renew deadline passed, stepped down) before a write was sent: nothing was sent. */
export class NotLeading extends Error {
  override readonly name = 'NotLeading'
  constructor(fence: Fence) {
    super(`the leadership term of election key ${fence.key} is over: the state write was not sent`)
  }
}

/** The state under `<prefix>state/` cannot be used; nothing in etcd was changed. */
export class EtcdStateError extends Error {
  override readonly name = 'EtcdStateError'
  readonly code = 'etcd_state_invalid'
  constructor(
    readonly root: string,
    readonly key: string,
    readonly problem: string,
  ) {
    super(
      `the state in etcd under ${root} is unusable: key ${key.slice(0, 200)} ${problem}. Nothing in etcd was changed. ` +
        'Inspect it (etcdctl get --prefix), repair or delete the key by hand if appropriate, then start again.',
    )
  }
}
