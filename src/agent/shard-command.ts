/**
 * The CLI's shard callbacks: an operator's shell command per start or stop, with the shard in the
 * environment (never spliced into the command text, so no value can inject shell syntax).
 */
import { spawn } from 'node:child_process'
import type { Logger } from 'pino'
import type { ShardContext, ShardStopContext } from './shard-runner.js'

/** A start command running longer than this is killed (its whole process group) and has failed. */
export const COMMAND_TIMEOUT_MS = 60_000
const MAX_OUTPUT = 4096

/** The environment a shard command sees: the agent's own plus the PXE_* variables. */
export function shardEnvironment(ctx: ShardContext | ShardStopContext, event: 'start' | 'stop'): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PXE_EVENT: event,
    PXE_SHARD_ID: String(ctx.shardId),
    PXE_TOTAL_SHARDS: String(ctx.totalShards),
    PXE_MAX_CONCURRENCY: String(ctx.maxConcurrency),
    PXE_NODE_ID: ctx.nodeId,
    PXE_GENERATION: String(ctx.generation),
    ...('reason' in ctx ? { PXE_STOP_REASON: ctx.reason } : {}),
  }
}

/**
 * Runs `command` for one shard event; resolves on exit 0, rejects otherwise (with the output's tail).
 * A start runs at most `timeoutMs`; a stop at most its context's stop timeout. Either is also killed
 * the moment its context's signal aborts (a stop timed out, or a start the shard's stop cut short).
 */
export function runShardCommand(command: string, event: 'start' | 'stop', ctx: ShardContext | ShardStopContext, logger: Logger, timeoutMs = COMMAND_TIMEOUT_MS): Promise<void> {
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
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-MAX_OUTPUT)
    }
    child.stdout.on('data', keep)
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
      const tail = output.trim().slice(-500)
      if (code === 0 && killedBecause === null) {
        logger.debug({ shard_id: ctx.shardId, event, output: tail || undefined }, 'shard command done')
        resolve()
        return
      }
      const why = killedBecause ?? (code !== null ? `exited with status ${code}` : `ended by signal ${signal}`)
      reject(new Error(`the ${event} command ${why}${tail ? `: ${tail}` : ''}`))
    })
  })
}
