/**
 * A resumable gateway session (SPEC "Session handoff"): what `onStop` may return after a plan move, what
 * `onStart`'s context carries for a resume, and its checks. The checks are the controller's own rules
 * (less the allowed hosts, which only the controller knows), so that the agent never sends an entry that
 * would make the controller refuse the whole check-in. Messages name the rule, never the value: a
 * session ID is a credential for the bot's session and must not reach a log.
 */
import { z } from 'zod'
import { parseResumeUrl } from '../core/resume-url.js'

/** A Discord gateway session another connection may RESUME. */
export interface ResumableSession {
  /** Discord's `session_id`: 1 to 128 letters and digits. */
  readonly sessionId: string
  /** The last sequence number the session received: an integer 0..2^53-1. */
  readonly sequence: number
  /** Discord's `resume_gateway_url`: wss://host[:port], at most 256 characters. */
  readonly resumeUrl: string
}

const SESSION_ID = /^[A-Za-z0-9]{1,128}$/
/**
 * Why `value` cannot be a resume URL by the rules every controller applies (all but its allowed
 * hosts), or null: the controller's own check, so that the agent never sends what would refuse a
 * whole check-in, and never starts a shard on a URL a controller would not have handed out.
 */
export function resumeUrlShapeProblem(value: string): string | null {
  const parsed = parseResumeUrl(value)
  return 'problem' in parsed ? parsed.problem : null
}

const sequenceSchema = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER)
const resumeUrlSchema = z.string().superRefine((value, ctx) => {
  const problem = resumeUrlShapeProblem(value)
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem })
})

/** A session as a host hands it over (`onStop`'s result). */
const hostSessionSchema = z.object({ sessionId: z.string().regex(SESSION_ID), sequence: sequenceSchema, resumeUrl: resumeUrlSchema }).strict()

/** A session on the wire: in a resume grant, and as a CLI stop command's last line of output. */
export const sessionWireSchema = z.object({ session_id: z.string().regex(SESSION_ID), sequence: sequenceSchema, resume_url: resumeUrlSchema }).strict()

const RULES: Record<string, string> = {
  sessionId: 'sessionId must be 1 to 128 letters and digits',
  session_id: 'session_id must be 1 to 128 letters and digits',
  sequence: 'must be an integer in 0..2^53-1',
}

/** The first broken rule of a failed parse, without the value. */
function ruleOf(error: z.ZodError): string {
  const issue = error.issues[0]
  if (issue === undefined) return 'is not a session'
  if (issue.code === 'unrecognized_keys') return `has unknown fields (${issue.keys.slice(0, 4).join(', ').slice(0, 80)})`
  const field = issue.path[0]
  if (typeof field !== 'string') return 'must be an object {sessionId, sequence, resumeUrl}'
  if (field === 'sequence') return `sequence ${RULES.sequence}`
  if (field === 'resumeUrl' || field === 'resume_url') return `${field} ${issue.code === 'custom' ? issue.message : 'must be a string'}`
  return RULES[field] ?? `${field} is not valid`
}

/** A host's session checked, or the rule it breaks. */
export function parseHostSession(value: unknown): { readonly session: ResumableSession } | { readonly problem: string } {
  const parsed = hostSessionSchema.safeParse(value)
  return parsed.success ? { session: parsed.data } : { problem: ruleOf(parsed.error) }
}

/** A wire session checked, or the rule it breaks. */
export function parseWireSession(value: unknown): { readonly session: ResumableSession } | { readonly problem: string } {
  const parsed = sessionWireSchema.safeParse(value)
  if (!parsed.success) return { problem: ruleOf(parsed.error) }
  const { session_id, sequence, resume_url } = parsed.data
  return { session: { sessionId: session_id, sequence, resumeUrl: resume_url } }
}

/**
 * Thrown by `onStart` when the handed-over session could not be resumed (Discord answered the RESUME
 * with INVALID_SESSION): the agent then claims a fresh Identify and calls `onStart` again with
 * `resume: null`. Thrown from a start that was not a resume, it is an ordinary start failure.
 */
export class ResumeRefusedError extends Error {
  override readonly name = 'ResumeRefusedError'
  constructor(message = 'the gateway refused the resume') {
    super(message)
  }
}

/** True for a ResumeRefusedError, also one from another copy of this package. */
export function isResumeRefused(err: unknown): boolean {
  return err instanceof ResumeRefusedError || (err instanceof Error && err.name === 'ResumeRefusedError')
}
