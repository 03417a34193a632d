/** `drain --wait`: polls the plan until the node holds no shard and every handoff of its shards is released. */
import type { ControllerApi } from '../api.js'
import type { RunContext } from '../command.js'
import { CtlError } from '../errors.js'
import { shardRange } from '../table.js'
import type { PlanNode } from '../wire.js'

const POLL_MS = 1000

/** What the node still holds, or null when it is done (exported for the tests). */
export function stillHeld(node: PlanNode | undefined, drainGeneration: number): string | null {
  if (node === undefined) return null // it left the live set: nothing of it runs any more
  const parts: string[] = []
  const id = node.node_id
  if (node.range_count > 0) parts.push(`${id} holds ${node.range_count} shard${node.range_count === 1 ? '' : 's'} (${shardRange(node.range_start, node.range_count)})`)
  if (node.pending_handoffs !== undefined) {
    if (node.pending_handoffs > 0) parts.push(node.pending_handoffs === 1 ? `1 shard waits for ${id} to release it` : `${node.pending_handoffs} shards wait for ${id} to release them`)
  } else if (node.generation === null || node.generation < drainGeneration) {
    // An older controller reports no handoff count: a node releases by reporting the drain's generation.
    parts.push(`${id} has not yet reported generation ${drainGeneration} (its release)`)
  }
  return parts.length === 0 ? null : parts.join(', ')
}

/** Waits (printing progress on stderr) and returns the seconds it took; throws CtlError at the timeout. */
export async function waitDrained(ctx: RunContext, api: ControllerApi, nodeId: string, drainGeneration: number, timeoutS: number): Promise<{ seconds: number; left: boolean }> {
  ctx.trapInterrupts()
  const started = ctx.now()
  let lastLine = ''
  let held = `what ${nodeId} holds is not known yet`
  for (;;) {
    try {
      const plan = (await api.plan()).value
      const node = plan.nodes.find((n) => n.node_id === nodeId)
      const what = stillHeld(node, drainGeneration)
      if (what === null) return { seconds: Math.round((ctx.now() - started) / 1000), left: node === undefined }
      held = what
    } catch (err) {
      if (err instanceof CtlError && err.code === 'interrupted') throw new CtlError(`interrupted: ${held}; ${nodeId} stays flagged for drain`, 'interrupted')
      // A fail-over can leave no controller answering for a few seconds: keep waiting until the timeout.
      if (!(err instanceof CtlError) || err.code !== 'no_controller') throw err
      held = `what ${nodeId} holds is unknown (${err.message.split('\n')[0]})`
    }
    const elapsed = (ctx.now() - started) / 1000
    const line = `waiting: ${held}`
    if (line !== lastLine) ctx.io.err(`${line} (${Math.round(elapsed)}s)`)
    lastLine = line
    if (elapsed >= timeoutS) throw new CtlError(`timed out after ${timeoutS} s: ${held}; ${nodeId} stays flagged for drain`, 'timeout')
    const remainingMs = timeoutS * 1000 - (ctx.now() - started)
    if (!(await ctx.sleep(Math.max(0, Math.min(POLL_MS, remainingMs))))) throw new CtlError(`interrupted: ${held}; ${nodeId} stays flagged for drain`, 'interrupted')
  }
}
