/**
 * The identity of a node that enrolls: the one kept in its state folder when that still holds, else a new
 * enrollment (kept there when a folder is given). Shared by NodeAgent.enroll and pxe-node --enroll.
 */
import { pino, type Logger } from 'pino'
import { systemClock, type AgentClock } from './clock.js'
import { enroll, type EnrollmentOptions } from './enrollment.js'
import { IdentityStateDir } from './identity-state.js'
import type { NodeIdentity } from './identity.js'

/** Enrollment, and where to keep the identity. */
export interface EnrollAgentOptions extends Omit<EnrollmentOptions, 'logger' | 'clock'> {
  /** A folder kept across restarts (key.pem 0600, cert.pem, ca.pem, plan-jwks.json); without it nothing touches the disk. */
  readonly stateDir?: string
}

/** The identity to start with, and how to keep a renewed one (null without a state folder). */
export interface EnrolledIdentity {
  readonly identity: NodeIdentity
  readonly keep: ((identity: NodeIdentity) => Promise<void>) | null
}

const SILENT = pino({ enabled: false })

/** Reuses the state folder's identity when it holds, else enrolls (and keeps the result there). */
export async function enrolledIdentity(opts: EnrollAgentOptions, logger: Logger = SILENT, clock: AgentClock = systemClock): Promise<EnrolledIdentity> {
  const { stateDir, ...enrollment } = opts
  const state = stateDir === undefined ? null : new IdentityStateDir(stateDir)
  if (state !== null) {
    const stored = await state.load(opts.name, opts.ca, clock.wallNow())
    if ('identity' in stored) {
      const { identity } = stored
      logger.info({ state_dir: state.dir, serial: identity.serial, not_after: new Date(identity.notAfter).toISOString() }, 'using the identity kept in the state folder (no enrollment)')
      return { identity, keep: (next) => state.save(next) }
    }
    if ('unusable' in stored) logger.warn({ state_dir: state.dir, reason: stored.unusable }, 'the identity kept in the state folder cannot be used: enrolling')
  }
  await state?.assertWritable()
  const identity = await enroll({ ...enrollment, logger, clock })
  // the token's use is spent: a write that fails now leaves the node running on the identity in memory
  await state?.save(identity).catch((err: Error) => logger.error({ state_dir: state.dir, err: err.message }, 'cannot keep the enrolled identity in the state folder; running on it from memory'))
  return { identity, keep: state === null ? null : (next) => state.save(next) }
}
