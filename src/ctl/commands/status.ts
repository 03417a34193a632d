/** `pxe-ctl status` and `pxe-ctl nodes`: the plan, as a summary or one row per node. */
import type { CommandSpec } from '../command.js'
import { emit } from '../output.js'
import { renderNodes, renderStatus } from '../views.js'

export const status: CommandSpec = {
  words: 'status',
  usage: '',
  summary: 'the fleet at a glance: leader, generation, planner, shards, nodes, handoffs, Identify budget, reshard',
  details: `Reads GET /v1/plan from the first controller that answers (an HA follower is skipped).
Fields an older controller does not report are shown as "not reported". -o json prints the plan as the
controller sent it.

Example:
  controller        https://10.0.0.5:8443
  leader            ctl-a
  generation        12
  planner           stable
  shards            64 total, 0 unassigned (max_concurrency 16)
  nodes             3 live, 1 draining (lease 30 s)
  pending handoffs  0
  identify budget   37/1000 used in 24h, 963 remaining, next release 2026-12-02T08:14:03.000Z (in 13h2m)
  reshard           none`,
  args: [],
  flags: [],
  async run(ctx) {
    const plan = await (await ctx.api()).plan()
    emit(ctx, plan.raw, () => renderStatus(plan.value, plan.controller, ctx.now()))
  },
}

export const nodes: CommandSpec = {
  words: 'nodes',
  usage: '',
  summary: 'one row per live node: range, count, capacity, health, reported generation, last seen, flags',
  details: `Reads GET /v1/plan. Columns: RANGE the shards it holds (first-last), COUNT, CAP its capacity,
READY/START/BACKOFF/FATAL its shard health counts, GEN the plan generation it last reported running,
LAST SEEN the age of its last check-in. FLAGS: draining (flagged for drain), stale-gen (it has not yet
reported the current generation), handoffs:N (shards taken from it wait for it to release them), fatal
(a shard failed fatally), idle (it holds no shard without draining). After the table, one line per name
flagged for drain that is not live (a typo, or a machine that is down).
-o json prints {"generation", "nodes", "drain_flags_not_live"} as the controller sent them.

Example:
  NODE       RANGE  COUNT  CAP  READY/START/BACKOFF/FATAL  GEN  LAST SEEN  FLAGS
  compaq-01  0-31      32   32  32/0/0/0                    12         3s  -
  compaq-02  -          0   32  0/0/0/0                     12         1s  draining
  dell-01    32-63     32   32  32/0/0/0                    12         4s  -
  ghost-01: flagged for drain, not live (no check-in within the lease); the flag is kept for when it joins`,
  args: [],
  flags: [],
  async run(ctx) {
    const plan = await (await ctx.api()).plan()
    const raw = plan.raw as Record<string, unknown>
    const json = { generation: raw.generation, nodes: raw.nodes, drain_flags_not_live: raw.drain_flags_not_live ?? null }
    emit(ctx, json, () => renderNodes(plan.value, ctx.now()))
  },
}
