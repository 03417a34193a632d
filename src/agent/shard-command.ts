/**
 * The CLI's shard callbacks: an operator's shell command per start or stop, with the shard in the
 * environment (never spliced into the command text, so no value can inject shell syntax).
 *
 * Session handoff (SPEC "Session handoff"): a start sees PXE_START_MODE (and, for a resume, the session
 * in PXE_RESUME_*) and exits 75 when the resume was refused; a stop may print the session as its last
 * line of stdout. Session values never reach a log: output lines that carry one are withheld.
 */
import { spawn } from 'node:child_process'
import type { Logger } from 'pino'
import { parseWireSession, ResumeRefusedError, type ResumableSession } from './session.js'
import type { ShardContext, ShardStopContext } from './shard-runner.js'

/** A start command running longer than this is killed (its whole process group) and has failed. */
export const COMMAND_TIMEOUT_MS = 60_000
/** The exit status by which a resuming start command says the gateway refused the resume (EX_TEMPFAIL). */
export const EXIT_RESUME_REFUSED = 75
const MAX_OUTPUT = 4096
const WITHHELD = '<line with a session withheld>'

/** The environment a shard command sees: the agent's own plus the PXE_* variables. */
export function shardEnvironment(ctx: ShardContext | ShardStopContext, event: 'start' | 'stop'): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PXE_EVENT: event,
    PXE_SHARD_ID: String(ctx.shardId),
    PXE_TOTAL_SHARDS: String(ctx.totalShards),
    // a live reshard's next set runs beside the current one until the switch (its own PXE_TOTAL_SHARDS)
    PXE_SHARD_SET: ctx.set ?? 'current',
    PXE_MAX_CONCURRENCY: String(ctx.maxConcurrency),
    PXE_NODE_ID: ctx.nodeId,
    PXE_GENERATION: String(ctx.generation),
    ...('reason' in ctx ? { PXE_STOP_REASON: ctx.reason } : startEnvironment(ctx.resume)),
  }
}

function startEnvironment(resume: ResumableSession | null): NodeJS.ProcessEnv {
  if (resume === null) return { PXE_START_MODE: 'identify' }
  return { PXE_START_MODE: 'resume', PXE_RESUME_SESSION_ID: resume.sessionId, PXE_RESUME_SEQUENCE: String(resume.sequence), PXE_RESUME_URL: resume.resumeUrl }
}

/** The session ID a command's last stdout line names, valid or not (to mask it in what is logged), or undefined. */
function reportedSessionId(stdout: string): string | undefined {
  try {
    const value: unknown = JSON.parse(stdout.trimEnd().split('\n').at(-1) ?? '')
    const id = typeof value === 'object' && value !== null ? (value as { session_id?: unknown }).session_id : undefined
    return typeof id === 'string' && id.length > 0 ? id : undefined
  } catch {
    return undefined
  }
}

/** The session a stop command printed as its last line of stdout, or undefined (anything else is no session). */
function sessionFromOutput(stdout: string, logger: Logger, shardId: number): ResumableSession | undefined {
  const last = stdout.trimEnd().split('\n').at(-1)?.trim() ?? ''
  if (!last.startsWith('{')) return undefined
  let value: unknown
  try {
    value = JSON.parse(last)
  } catch {
    return undefined
  }
  const parsed = parseWireSession(value)
  if ('session' in parsed) return parsed.session
  if (last.includes('session_id')) logger.warn({ shard_id: shardId, problem: parsed.problem }, "the stop command's last line looks like a session but is not one: no session is handed over")
  return undefined
}

/**
 * The output for a log or an error: lines that may carry a session withheld, and every session ID
 * known here masked wherever it appears (the resumed one, and the one a stop command reported).
 */
function redact(output: string, ctx: ShardContext | ShardStopContext, reported: string | undefined): string {
  const lines = output.split('\n').map((line) => (/session_id|sessionId/.test(line) ? WITHHELD : line))
  let text = lines.join('\n')
  const resumed = 'resume' in ctx ? ctx.resume?.sessionId : undefined
  for (const id of [resumed, reported]) if (id !== undefined) text = text.split(id).join('<session_id>')
  return text
}

/**
 * Runs `command` for one shard event; resolves on exit 0 (a stop with the session it printed, if any),
 * rejects otherwise (with the output's tail; ResumeRefusedError for a resume start's exit 75). A start
 * runs at most `timeoutMs`; a stop at most its context's stop timeout. Either is also killed the moment
 * its context's signal aborts (a stop timed out, or a start the shard's stop cut short).
 */
export function runShardCommand(
  command: string,
  event: 'start' | 'stop',
  ctx: ShardContext | ShardStopContext,
  logger: Logger,
  timeoutMs = COMMAND_TIMEOUT_MS,
): Promise<ResumableSession | undefined> {
  const limitMs = 'timeoutMs' in ctx ? ctx.timeoutMs : timeoutMs
  return new Promise((resolve, reject) => {
    if (ctx.signal.aborted) {
      reject(new Error(`the ${event} command was not run: the shard's ${event === 'stop' ? 'stop timeout had passed' : 'stop had begun'}`))
      return
    }
    // Its own process group: a timeout kills everything it started, and a terminal's Ctrl-C reaches
    // only the agent, which then stops the shards in order.
    const child = spawn('/bin/sh', ['-c', command], { env: shardEnvironment(ctx, event), stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    let output = ''
    let stdout = ''
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-MAX_OUTPUT)
    }
    child.stdout.on('data', (chunk: Buffer) => {
      keep(chunk)
      stdout = (stdout + chunk.toString('utf8')).slice(-MAX_OUTPUT)
    })
    child.stderr.on('data', keep)
    let killedBecause: string | null = null
    const kill = (why: string) => {
      if (killedBecause !== null) return
      killedBecause = why
      try {
        process.kill(-child.pid!, 'SIGKILL')
      } catch {
        child.kill('SIGKILL')
      }
    }
    const timer = setTimeout(() => kill(`ran longer than ${limitMs} ms and was killed with its process group`), limitMs)
    const onAbort = () => kill(event === 'stop' ? `ran past the stop timeout (${limitMs} ms) and was killed with its process group` : "was killed with its process group: the shard's stop began")
    ctx.signal.addEventListener('abort', onAbort, { once: true })
    const done = () => {
      clearTimeout(timer)
      ctx.signal.removeEventListener('abort', onAbort)
    }
    child.once('error', (err) => {
      done()
      reject(new Error(`cannot run the ${event} command: ${err.message}`))
    })
    child.once('close', (code, signal) => {
      done()
      const session = code === 0 && killedBecause === null && event === 'stop' ? sessionFromOutput(stdout, logger, ctx.shardId) : undefined
      const tail = redact(output, ctx, session?.sessionId ?? reportedSessionId(stdout)).trim().slice(-500)
      if (code === 0 && killedBecause === null) {
        logger.debug({ shard_id: ctx.shardId, event, output: tail || undefined }, 'shard command done')
        resolve(session)
        return
      }
      if (code === EXIT_RESUME_REFUSED && killedBecause === null && event === 'start' && 'resume' in ctx && ctx.resume !== null) {
        reject(new ResumeRefusedError(`the start command exited with status ${EXIT_RESUME_REFUSED}: the resume was refused`))
        return
      }
      const why = killedBecause ?? (code !== null ? `exited with status ${code}` : `ended by signal ${signal}`)
      reject(new Error(`the ${event} command ${why}${tail ? `: ${tail}` : ''}`))
    })
  })
}
