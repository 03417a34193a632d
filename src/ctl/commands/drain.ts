/** `pxe-ctl drain NODE` and `pxe-ctl undrain NODE` (SPEC "Operator endpoints", "Operator view"). */
import { boolFlag, nodeName, seconds, stringFlag } from '../args.js'
import { Refused, type ControllerApi, type Result } from '../api.js'
import type { CommandSpec, RunContext } from '../command.js'
import { CtlError, UsageError } from '../errors.js'
import { dryRunDrain, movedLine, strandedRefusal, unassignedLine, type DryRun } from '../dry-run.js'
import { emit, warn } from '../output.js'
import { renderTable, shardRange } from '../table.js'
import type { DrainAnswer, Plan } from '../wire.js'
import { waitDrained } from './drain-wait.js'

const DEFAULT_WAIT_S = 300

function notLive(nodeId: string): string {
  return `${nodeId} is not live (no check-in within the lease); the flag would be kept for when it joins`
}

/** The dry run, or null (with a warning) when this pxe-ctl cannot compute one: the controller then checks the capacity alone. */
function predicted(ctx: RunContext, plan: Plan, nodeId: string): DryRun | null {
  try {
    return dryRunDrain(plan, nodeId)
  } catch (err) {
    if (!(err instanceof CtlError)) throw err
    warn(ctx, `${err.message}; whether the drain leaves shards without a node is left to the controller to check`)
    return null
  }
}

/**
 * POST the drain, with `"force": true` when forced. An older controller knows no "force" (and never
 * refuses a drain for capacity): its 400 for the unknown field is answered by sending the drain again
 * without it. A 409 insufficient_capacity means the plan changed since pxe-ctl read it.
 */
async function sendDrain(ctx: RunContext, api: ControllerApi, nodeId: string, force: boolean): Promise<Result<DrainAnswer>> {
  try {
    return await api.setDraining(nodeId, true, force)
  } catch (err) {
    if (!(err instanceof Refused)) throw err
    if (force && err.status === 400 && /unknown field "force"/.test(err.message)) {
      warn(ctx, 'the controller does not know "force" (an older version, which never refuses a drain for capacity); sent the drain without it')
      return api.setDraining(nodeId, true)
    }
    if (err.code === 'insufficient_capacity') {
      throw new CtlError(`${err.message}; the plan changed since pxe-ctl read it: check with "pxe-ctl nodes", add capacity, or pass --force`, err.code)
    }
    throw err
  }
}

/** `b is draining (plan generation 13)`, with how many shards have no node when some have none, or when forced. */
function drainedLine(nodeId: string, a: DrainAnswer, totalShards: number, forced: boolean): string {
  const head = `${nodeId} is draining (plan generation ${a.generation})`
  if (a.unassigned === undefined || (a.unassigned === 0 && !forced)) return head
  return `${head}; ${a.unassigned} of ${totalShards} shards ${a.unassigned === 1 ? 'is' : 'are'} without a node`
}

export const drain: CommandSpec = {
  words: 'drain',
  usage: 'NODE [--dry-run] [--wait [--timeout S]] [--force]',
  summary: 'flag a node for drain: the plan moves its shards to the other nodes',
  details: `Sets the drain flag (POST /v1/nodes/NODE/drain {"draining": true}); the controller re-plans at once
and the flag is kept across restarts until "pxe-ctl undrain". A NODE that is not live in the plan is
refused unless --force (a misspelled name would otherwise be flagged silently).

A drain after which more shards would have no node than now (the other live nodes lack the capacity
to take NODE's) is refused unless --force: pxe-ctl computes it first with the controller's planner and
says so without asking the controller (exit 1), and the controller refuses it too (409
insufficient_capacity, e.g. when the plan changed in between: its message is printed, exit 1). With
--force it sends {"draining": true, "force": true} and prints how many shards are left without a node.

--dry-run fetches the plan and computes, with the controller's own planner (the one GET /v1/plan
names), the plan with NODE flagged; it prints how many shards would move and to which nodes, how many
would be left without a node, and changes nothing.

--wait then polls the plan until NODE holds no shard and the handoffs of its shards are released (it
reported the new plan, so the new owners may start them), printing progress on stderr. At the
timeout, or on Ctrl-C, it exits 1 saying what is still held; the node stays flagged either way.

Examples:
  $ pxe-ctl drain compaq-02 --dry-run
  16 shards would move: 8 to compaq-01, 8 to dell-01
  0 shards would be left without a node
  $ pxe-ctl drain compaq-01
  pxe-ctl: error: draining compaq-01 would leave 4 of 12 shards without a node (the other live nodes lack the capacity); add capacity or pass --force
  $ pxe-ctl drain compaq-01 --force
  compaq-01 is draining (plan generation 14); 4 of 12 shards are without a node
  $ pxe-ctl drain compaq-02 --wait
  compaq-02 is draining (plan generation 13)
  waiting: 16 shards wait for compaq-02 to release them (0s)
  compaq-02 holds no shard and its handoffs are released (after 4s)`,
  args: ['NODE'],
  flags: [
    { name: 'dry-run', help: 'print what would move (computed with the controller\'s planner), change nothing' },
    { name: 'wait', help: 'after the drain, wait until NODE holds no shard and its handoffs are released' },
    { name: 'timeout', value: 'S', help: `with --wait: give up after S seconds, exit 1 saying what is still held (default ${DEFAULT_WAIT_S})` },
    { name: 'force', help: 'drain even if it leaves shards without a node, or NODE is not live (the flag is kept for when it joins)' },
  ],
  async run(ctx, parsed) {
    const nodeId = nodeName(parsed.positionals[0]!, 'drain')
    const dryRun = boolFlag(parsed, 'dry-run')
    const wait = boolFlag(parsed, 'wait')
    const timeoutFlag = stringFlag(parsed, 'timeout')
    if (dryRun && wait) throw new UsageError('--dry-run and --wait do not go together', 'drain')
    if (timeoutFlag !== undefined && !wait) throw new UsageError('--timeout needs --wait', 'drain')
    const timeoutS = timeoutFlag === undefined ? DEFAULT_WAIT_S : seconds('--timeout', timeoutFlag, 1, 86_400, 'drain')
    const force = boolFlag(parsed, 'force')
    const api = await ctx.api()
    const plan = (await api.plan()).value
    const live = plan.nodes.some((n) => n.node_id === nodeId)
    if (!live) {
      if (!force) throw new CtlError(`${notLive(nodeId)}. Check the name with "pxe-ctl nodes"; pass --force to flag it anyway`, 'not_live')
      warn(ctx, notLive(nodeId))
    }
    if (dryRun) {
      const result = dryRunDrain(plan, nodeId)
      emit(ctx, result, () => {
        const rows = result.nodes
          .filter((n) => n.range_start !== n.next_range_start || n.range_count !== n.next_range_count)
          .map((n) => [n.node_id, shardRange(n.range_start, n.range_count), shardRange(n.next_range_start, n.next_range_count)])
        const assumed = result.planner_reported ? '' : ' (the controller does not say; the default assumed)'
        const head = `${movedLine(result)}\n${unassignedLine(result)}\nplanner ${result.planner}${assumed}, from generation ${result.generation}; dry run: nothing was changed`
        return rows.length === 0 ? head : `${head}\n${renderTable(['NODE', 'RANGE NOW', 'RANGE AFTER'], rows)}`
      })
      return
    }
    // Said before the controller is asked (SPEC "Operator endpoints"): a drain must not strand shards unless forced.
    const prediction = predicted(ctx, plan, nodeId)
    if (prediction !== null && prediction.stranded > 0 && !force) throw new CtlError(strandedRefusal(prediction), 'insufficient_capacity')
    const answer = await sendDrain(ctx, api, nodeId, force)
    const a = answer.value
    if (a.live === false && live) warn(ctx, `${nodeId} left the live set meanwhile; the flag is kept for when it joins`)
    const line = drainedLine(nodeId, a, plan.total_shards, force)
    if (!wait) {
      emit(ctx, answer.raw, () => line)
      return
    }
    if (ctx.global.output !== 'json') ctx.io.out(line)
    const done = await waitDrained(ctx, api, nodeId, a.generation, timeoutS)
    const how = done.left ? 'left the live set' : 'holds no shard and its handoffs are released'
    emit(ctx, { ...(answer.raw as object), released: true, waited_seconds: done.seconds }, () => `${nodeId} ${how} (after ${done.seconds}s)`)
  },
}

export const undrain: CommandSpec = {
  words: 'undrain',
  usage: 'NODE [--force]',
  summary: 'clear a node\'s drain flag: the plan gives it shards again',
  details: `Clears the drain flag (POST /v1/nodes/NODE/drain {"draining": false}); the controller re-plans at once.
A NODE that is not live is accepted when it is flagged for drain (that clears a stale flag, e.g. of a
misspelled name); otherwise it is refused unless --force.

Example:
  $ pxe-ctl undrain compaq-02
  compaq-02 is no longer draining (plan generation 14)`,
  args: ['NODE'],
  flags: [{ name: 'force', help: 'send it for a NODE that is neither live nor flagged for drain' }],
  async run(ctx, parsed) {
    const nodeId = nodeName(parsed.positionals[0]!, 'undrain')
    const api = await ctx.api()
    const plan = (await api.plan()).value
    const live = plan.nodes.some((n) => n.node_id === nodeId)
    const flagged = plan.drain_flags_not_live?.includes(nodeId) === true
    if (!live && !flagged && !boolFlag(parsed, 'force')) {
      const known = plan.drain_flags_not_live === undefined ? 'not live' : 'not live and not flagged for drain'
      throw new CtlError(`${nodeId} is ${known}; nothing to undrain. Check the name with "pxe-ctl nodes"; pass --force to send it anyway`, 'not_live')
    }
    const answer = await api.setDraining(nodeId, false)
    const note = answer.value.live === false ? ' (it is not live: its stale flag is cleared)' : ''
    emit(ctx, answer.raw, () => `${nodeId} is no longer draining (plan generation ${answer.value.generation})${note}`)
  },
}
