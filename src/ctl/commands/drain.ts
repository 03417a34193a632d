/** `pxe-ctl drain NODE` and `pxe-ctl undrain NODE` (SPEC "Operator endpoints", "Operator view"). */
import { boolFlag, nodeName, seconds, stringFlag } from '../args.js'
import type { CommandSpec } from '../command.js'
import { CtlError, UsageError } from '../errors.js'
import { dryRunDrain, movedLine } from '../dry-run.js'
import { emit, warn } from '../output.js'
import { renderTable, shardRange } from '../table.js'
import { waitDrained } from './drain-wait.js'

const DEFAULT_WAIT_S = 300

function notLive(nodeId: string): string {
  return `${nodeId} is not live (no check-in within the lease); the flag would be kept for when it joins`
}

export const drain: CommandSpec = {
  words: 'drain',
  usage: 'NODE [--dry-run] [--wait [--timeout S]] [--force]',
  summary: 'flag a node for drain: the plan moves its shards to the other nodes',
  details: `Sets the drain flag (POST /v1/nodes/NODE/drain {"draining": true}); the controller re-plans at once
and the flag is kept across restarts until "pxe-ctl undrain". A NODE that is not live in the plan is
refused unless --force (a misspelled name would otherwise be flagged silently).

--dry-run fetches the plan and computes, with the controller's own planner (the one GET /v1/plan
names), the plan with NODE flagged; it prints how many shards would move and to which nodes, and
changes nothing.

--wait then polls the plan until NODE holds no shard and the handoffs of its shards are released (it
reported the new plan, so the new owners may start them), printing progress on stderr. At the
timeout, or on Ctrl-C, it exits 1 saying what is still held; the node stays flagged either way.

Examples:
  $ pxe-ctl drain compaq-02 --dry-run
  16 shards would move: 8 to compaq-01, 8 to dell-01
  $ pxe-ctl drain compaq-02 --wait
  compaq-02 is draining (plan generation 13)
  waiting: 16 shards wait for compaq-02 to release them (0s)
  compaq-02 holds no shard and its handoffs are released (after 4s)`,
  args: ['NODE'],
  flags: [
    { name: 'dry-run', help: 'print what would move (computed with the controller\'s planner), change nothing' },
    { name: 'wait', help: 'after the drain, wait until NODE holds no shard and its handoffs are released' },
    { name: 'timeout', value: 'S', help: `with --wait: give up after S seconds, exit 1 saying what is still held (default ${DEFAULT_WAIT_S})` },
    { name: 'force', help: 'drain a NODE that is not live (the flag is kept for when it joins)' },
  ],
  async run(ctx, parsed) {
    const nodeId = nodeName(parsed.positionals[0]!, 'drain')
    const dryRun = boolFlag(parsed, 'dry-run')
    const wait = boolFlag(parsed, 'wait')
    const timeoutFlag = stringFlag(parsed, 'timeout')
    if (dryRun && wait) throw new UsageError('--dry-run and --wait do not go together', 'drain')
    if (timeoutFlag !== undefined && !wait) throw new UsageError('--timeout needs --wait', 'drain')
    const timeoutS = timeoutFlag === undefined ? DEFAULT_WAIT_S : seconds('--timeout', timeoutFlag, 1, 86_400, 'drain')
    const api = await ctx.api()
    const plan = (await api.plan()).value
    const live = plan.nodes.some((n) => n.node_id === nodeId)
    if (!live) {
      if (!boolFlag(parsed, 'force')) throw new CtlError(`${notLive(nodeId)}. Check the name with "pxe-ctl nodes"; pass --force to flag it anyway`, 'not_live')
      warn(ctx, notLive(nodeId))
    }
    if (dryRun) {
      const result = dryRunDrain(plan, nodeId)
      emit(ctx, result, () => {
        const rows = result.nodes
          .filter((n) => n.range_start !== n.next_range_start || n.range_count !== n.next_range_count)
          .map((n) => [n.node_id, shardRange(n.range_start, n.range_count), shardRange(n.next_range_start, n.next_range_count)])
        const assumed = result.planner_reported ? '' : ' (the controller does not say; the default assumed)'
        const head = `${movedLine(result)}\nplanner ${result.planner}${assumed}, from generation ${result.generation}; dry run: nothing was changed`
        return rows.length === 0 ? head : `${head}\n${renderTable(['NODE', 'RANGE NOW', 'RANGE AFTER'], rows)}`
      })
      return
    }
    const answer = await api.setDraining(nodeId, true)
    const a = answer.value
    if (a.live === false && live) warn(ctx, `${nodeId} left the live set meanwhile; the flag is kept for when it joins`)
    if (!wait) {
      emit(ctx, answer.raw, () => `${nodeId} is draining (plan generation ${a.generation})`)
      return
    }
    if (ctx.global.output !== 'json') ctx.io.out(`${nodeId} is draining (plan generation ${a.generation})`)
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
