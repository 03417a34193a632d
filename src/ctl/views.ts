/** The plan as people read it: the status block (status, watch) and the node table (nodes, watch). */
import { age, renderPairs, renderTable, shardRange } from './table.js'
import type { Plan, PlanNode, ReshardState } from './wire.js'

/** The reshard state in one line. */
export function reshardLine(reshard: ReshardState | null | undefined): string {
  if (reshard === undefined) return 'not reported by this controller'
  if (reshard === null) return 'none'
  const parts = [reshard.phase]
  if (reshard.total_shards !== undefined) parts.push(`${reshard.from_total_shards === undefined ? '' : `from ${reshard.from_total_shards} `}to ${reshard.total_shards} shards`)
  if (reshard.generation !== undefined) parts.push(`generation ${reshard.generation}`)
  if (reshard.waiting_nodes !== undefined) parts.push(`waiting for ${reshard.waiting_nodes} node${reshard.waiting_nodes === 1 ? '' : 's'}`)
  if (reshard.ready_shards !== undefined && reshard.total_shards !== undefined) parts.push(`${reshard.ready_shards}/${reshard.total_shards} next-set shards running`)
  if (reshard.unassigned !== undefined && reshard.unassigned > 0) parts.push(`${reshard.unassigned} without a node (capacity)`)
  if (reshard.pending_handoffs !== undefined && reshard.pending_handoffs > 0) parts.push(`${reshard.pending_handoffs} waiting for a release`)
  return parts.join(', ')
}

function identifyLine(plan: Plan, now: number): string {
  const id = plan.identify
  if (id === undefined) return 'not reported by this controller'
  if (id.daily_limit === null) return 'no daily limit'
  const used = `${id.used_24h ?? '?'}/${id.daily_limit} used in 24h, ${id.remaining ?? '?'} remaining`
  if (id.next_release_at === null) return `${used}, nothing to release`
  const at = Date.parse(id.next_release_at)
  return `${used}, next release ${id.next_release_at}${Number.isNaN(at) ? '' : ` (in ${age(at - now)})`}`
}

/** The status block: who leads, the plan's numbers, the budget, the reshard. */
export function renderStatus(plan: Plan, controller: string, now: number): string {
  const draining = plan.nodes.filter((n) => n.draining).length
  const notLive = plan.drain_flags_not_live ?? []
  const pairs: [string, string][] = [
    ['controller', controller],
    ['leader', plan.leader ?? 'not reported by this controller'],
    ['generation', String(plan.generation)],
    ['planner', plan.planner ?? 'not reported by this controller'],
    ['shards', `${plan.total_shards} total, ${plan.unassigned} unassigned (max_concurrency ${plan.max_concurrency})`],
    ['nodes', `${plan.nodes.length} live, ${draining} draining (lease ${plan.lease_seconds} s)`],
    ['pending handoffs', plan.pending_handoffs === undefined ? 'not reported by this controller' : String(plan.pending_handoffs)],
    ['identify budget', identifyLine(plan, now)],
    ['reshard', reshardLine(plan.reshard)],
  ]
  if (notLive.length > 0) pairs.push(['drain flags', `${notLive.join(', ')} (not live: kept for when they join)`])
  if (plan.recent_leaves !== undefined) pairs.push(['left', leavesLine(plan.recent_leaves, now)])
  if (plan.rest !== undefined) pairs.push(['rest budget', restLine(plan.rest)])
  return renderPairs(pairs)
}

/** The REST budget in one line: what the shares in force hand out of the safe budget, and the demand. */
function restLine(rest: Exclude<Plan['rest'], undefined>): string {
  if (rest === null) return 'not configured'
  const held = rest.demand_per_second > rest.allocated_per_second ? ' (the excess waits on the nodes)' : ''
  return `${rest.allocated_per_second}/s of ${rest.budget_per_second}/s handed out, demand ${rest.demand_per_second}/s${held}`
}

/** Nodes that left on purpose in the last hour: how many, and the newest few with how long ago. */
function leavesLine(leaves: readonly { node_id: string; left_at: string }[], now: number): string {
  if (leaves.length === 0) return 'none in the last hour'
  const shown = leaves.slice(0, 3).map((l) => `${l.node_id} ${Number.isNaN(Date.parse(l.left_at)) ? '?' : `${age(now - Date.parse(l.left_at))} ago`}`)
  return `${leaves.length} in the last hour (${shown.join(', ')}${leaves.length > 3 ? ', …' : ''})`
}

/** Below this much certificate life left a node is flagged (renewal runs at two thirds of a lifetime). */
const CERT_WARN_MS = 60 * 60 * 1000

/** How long the node's certificate has left: "5h", "expired", or "-" when the controller does not say. */
function certLeft(notAfter: string | null | undefined, now: number): string {
  if (notAfter === undefined || notAfter === null) return '-'
  const at = Date.parse(notAfter)
  if (Number.isNaN(at)) return '?'
  return at <= now ? 'expired' : age(at - now)
}

/** The flags of one node: why an operator should look at it. */
export function nodeFlags(node: PlanNode, plan: Plan): string[] {
  const flags: string[] = []
  if (node.draining) flags.push('draining')
  if (node.generation === null || node.generation < plan.generation) flags.push('stale-gen')
  if ((node.pending_handoffs ?? 0) > 0) flags.push(`handoffs:${node.pending_handoffs}`)
  if (node.fatal_shards > 0) flags.push('fatal')
  if (node.range_count === 0 && !node.draining) flags.push('idle')
  const expires = node.cert_not_after === undefined || node.cert_not_after === null ? NaN : Date.parse(node.cert_not_after)
  // an enrolled node renews at two thirds of its lifetime: a day-long certificate with an hour left did not
  if (!Number.isNaN(expires) && expires - Date.parse(node.last_seen) < CERT_WARN_MS) flags.push('cert-expiring')
  return flags
}

/** One row per node, then one line per drain flag of a node that is not live. */
export function renderNodes(plan: Plan, now: number): string {
  const rows = plan.nodes.map((n) => [
    n.node_id,
    shardRange(n.range_start, n.range_count),
    String(n.range_count),
    String(n.capacity),
    `${n.ready_shards}/${n.starting_shards}/${n.backoff_shards}/${n.fatal_shards}`,
    n.generation === null ? '-' : String(n.generation),
    Number.isNaN(Date.parse(n.last_seen)) ? '?' : age(now - Date.parse(n.last_seen)),
    certLeft(n.cert_not_after, now),
    nodeFlags(n, plan).join(',') || '-',
  ])
  const table = plan.nodes.length === 0 ? 'no live node' : renderTable(['NODE', 'RANGE', 'COUNT', 'CAP', 'READY/START/BACKOFF/FATAL', 'GEN', 'LAST SEEN', 'CERT LEFT', 'FLAGS'], rows, new Set([2, 3, 5, 6, 7]))
  const flagged = (plan.drain_flags_not_live ?? []).map((name) => `${name}: flagged for drain, not live (no check-in within the lease); the flag is kept for when it joins`)
  return [table, ...flagged].join('\n')
}
