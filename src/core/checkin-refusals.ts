/** The check-ins the controller refuses before it changes anything (SPEC "Check-in"). */
import { AppError } from '../errors.js'
import type { NodeRecord } from './node-record.js'
import type { CheckinBody } from './schemas.js'
import type { CertRef } from './types.js'

/**
 * Throws unless a check-in may register: it must not report a generation above the controller's
 * `generation` (a plan this controller never made), and a new certificate for a live node (`existing`)
 * must be newer than the one it replaces (else two holders of the name would take turns).
 */
export function assertCheckinAccepted(existing: NodeRecord | undefined, body: CheckinBody, cert: CertRef, generation: number): void {
  if (body.generation !== undefined && body.generation > generation) {
    throw new AppError(
      'invalid_request',
      `generation ${body.generation} is above the controller's current generation ${generation}: this node ran a plan this controller does not know ` +
        '(state_dir restored from an older copy, or lost?); restart its agent without its stored generation once its shards stopped (docs/backup-and-restore.md, "Restoring an older state_dir")',
    )
  }
  const rotated = existing !== undefined && existing.certSerial !== cert.serial
  if (rotated && !(cert.notBefore > existing.certNotBefore)) {
    throw new AppError('identity_conflict', `node ${body.node_id} is live with another certificate that is not older than this one`)
  }
}
