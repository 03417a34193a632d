/** `pxe-ctl reshard N|abort|status` (SPEC "Live resharding"). */
import { Refused } from '../api.js'
import type { ControllerApi } from '../api.js'
import { boolFlag, integer, seconds, stringFlag } from '../args.js'
import type { CommandSpec, RunContext } from '../command.js'
import { CtlError, UsageError } from '../errors.js'
import { emit } from '../output.js'
import { renderPairs } from '../table.js'
import { reshardLine } from '../views.js'

const DEFAULT_WAIT_S = 600
const POLL_MS = 1000

/** A 404 from /v1/reshard: this controller has no live resharding. */
async function orNotSupported<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op()
  } catch (err) {
    // the controller's own "nothing to abort" is its answer, not a missing endpoint
    if (err instanceof Refused && err.status === 404 && !err.message.includes('no live reshard')) throw new CtlError(`live resharding is not supported by this controller (${err.message})`, 'not_supported')
    throw err
  }
}

async function waitSwitched(ctx: RunContext, api: ControllerApi, to: number, timeoutS: number): Promise<number> {
  ctx.trapInterrupts()
  const started = ctx.now()
  let last = ''
  for (;;) {
    const plan = (await api.plan()).value
    if (plan.total_shards === to && (plan.reshard ?? null) === null) return Math.round((ctx.now() - started) / 1000)
    if (plan.total_shards !== to && (plan.reshard ?? null) === null) throw new CtlError(`the reshard to ${to} shards ended without a switch (aborted?): the controller runs ${plan.total_shards} shards`, 'aborted')
    const line = `waiting for the switch to ${to} shards: ${reshardLine(plan.reshard)}`
    if (line !== last) ctx.io.err(`${line} (${Math.round((ctx.now() - started) / 1000)}s)`)
    last = line
    if (ctx.now() - started >= timeoutS * 1000) throw new CtlError(`timed out after ${timeoutS} s: the reshard to ${to} shards has not switched (${reshardLine(plan.reshard)})`, 'timeout')
    if (!(await ctx.sleep(POLL_MS))) throw new CtlError(`interrupted: the reshard to ${to} shards goes on without pxe-ctl`, 'interrupted')
  }
}

export const reshard: CommandSpec = {
  words: 'reshard',
  usage: 'N [--wait [--timeout S]] | abort | status',
  summary: 'change the shard count with no downtime, abort a reshard, or show one',
  details: `reshard N: POST /v1/reshard {"total_shards": N} (N in 1..65536, a multiple of max_concurrency). The
  nodes start the next set beside the current one; the controller switches once every next-set shard
  runs. --wait polls the plan until the switch.
reshard abort: DELETE /v1/reshard, the next set is dropped.
reshard status: the reshard state GET /v1/plan reports (also the restart barrier after a restart
  with another total_shards).
A controller without live resharding answers 404: pxe-ctl says "live resharding is not supported by
this controller" and exits 1.

Example:
  $ pxe-ctl reshard 128 --wait
  reshard from 64 to 128 shards started (generation 15)`,
  args: ['N|abort|status'],
  flags: [
    { name: 'wait', help: 'with N: wait until the controller switched to N shards' },
    { name: 'timeout', value: 'S', help: `with --wait: give up after S seconds, exit 1 (default ${DEFAULT_WAIT_S})` },
  ],
  async run(ctx, parsed) {
    const what = parsed.positionals[0]!
    const wait = boolFlag(parsed, 'wait')
    const timeoutFlag = stringFlag(parsed, 'timeout')
    if (timeoutFlag !== undefined && !wait) throw new UsageError('--timeout needs --wait', 'reshard')
    if ((what === 'abort' || what === 'status') && wait) throw new UsageError(`--wait goes with "reshard N", not "reshard ${what}"`, 'reshard')
    // Every usage check before the context is read: a bad command line is exit 2 whatever the context.
    const to = what === 'abort' || what === 'status' ? null : integer('N', what, 1, 65_536, 'reshard')
    const timeoutS = timeoutFlag === undefined ? DEFAULT_WAIT_S : seconds('--timeout', timeoutFlag, 1, 86_400, 'reshard')
    const api = await ctx.api()
    if (what === 'status') {
      const plan = await api.plan()
      const raw = plan.raw as Record<string, unknown>
      const json = { generation: raw.generation, total_shards: raw.total_shards, reshard: raw.reshard ?? null }
      emit(ctx, json, () => renderPairs([['shards', String(plan.value.total_shards)], ['generation', String(plan.value.generation)], ['reshard', reshardLine(plan.value.reshard)]]))
      return
    }
    if (what === 'abort') {
      const answer = await orNotSupported(() => api.abortReshard())
      emit(ctx, answer.json ?? {}, () => 'reshard aborted: the next set is dropped')
      return
    }
    if (to === null) throw new Error('unreachable: abort and status returned above')
    const answer = await orNotSupported(() => api.startReshard(to))
    const a = answer.value
    const started = `reshard from ${a.from ?? '?'} to ${a.to ?? to} shards started (generation ${a.generation ?? '?'})`
    if (!wait) return emit(ctx, answer.raw, () => started)
    if (ctx.global.output !== 'json') ctx.io.out(started)
    const secs = await waitSwitched(ctx, api, to, timeoutS)
    emit(ctx, { ...(answer.raw as object), switched: true, waited_seconds: secs }, () => `switched to ${to} shards (after ${secs}s)`)
  },
}
