/**
 * The CLI's shard callbacks: an operator's shell command per start or stop, with the shard in the
 * environment (never spliced into the command text, so no value can inject shell syntax).
 */
import { spawn } from 'node:child_process'
import type { Logger } from 'pino'
import type { ShardContext, ShardStopContext } from './shard-runner.js'

/** A command running longer than this is killed (its whole process group) and has failed. */
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

/** Runs `command` for one shard event; resolves on exit 0, rejects otherwise (with the output's tail). */
export function runShardCommand(command: string, event: 'start' | 'stop', ctx: ShardContext | ShardStopContext, logger: Logger, timeoutMs = COMMAND_TIMEOUT_MS): Promise<void> {
  return new Promise((resolve, reject) => {
    // Its own process group: a timeout kills everything it started, and a terminal's Ctrl-C reaches
    // only the agent, which then stops the shards in order.
    const child = spawn('/bin/sh', ['-c', command], { env: shardEnvironment(ctx, event), stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    let output = ''
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-MAX_OUTPUT)
    }
    child.stdout.on('data', keep)
    child.stderr.on('data', keep)
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      try {
        process.kill(-child.pid!, 'SIGKILL')
      } catch {
        child.kill('SIGKILL')
      }
    }, timeoutMs)
    child.once('error', (err) => {
      clearTimeout(timer)
      reject(new Error(`cannot run the ${event} command: ${err.message}`))
    })
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      const tail = output.trim().slice(-500)
      if (code === 0 && !timedOut) {
        logger.debug({ shard_id: ctx.shardId, event, output: tail || undefined }, 'shard command done')
        resolve()
        return
      }
      const why = timedOut ? `ran longer than ${timeoutMs} ms and was killed` : code !== null ? `exited with status ${code}` : `ended by signal ${signal}`
      reject(new Error(`the ${event} command ${why}${tail ? `: ${tail}` : ''}`))
    })
  })
}
