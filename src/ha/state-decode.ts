/**
 * Turns the entries under `<prefix>state/` (read at one revision) back into a DurableState, validating
 * every key and value with the core's zod schemas. A key or value that is not what we write is refused
 * (EtcdStateError naming the key), never skipped: a controller must not run on state it cannot read.
 *
 * Handoffs follow the write order (README.md): an entry newer than the meta's generation belongs to a
 * write whose meta never landed, so it is ignored; of the other entries covering a shard only the newest
 * counts, older ones were superseded by a write whose release step did not land yet. Entries are runs
 * (`handoff-run/`) or, as earlier releases wrote them, one per shard (`handoff/`); both load.
 */
import { z } from 'zod'
import type { DurableState, PersistedHandoff, PersistedNode, StateMeta } from '../core/durable-state.js'
import { durableStateSchema, handoffSchema, persistedNodeSchema, stateMetaSchema } from '../core/durable-state-schema.js'
import { nameSchema } from '../core/names.js'
import type { EtcdKeyValue } from './etcd-api.js'
import { EtcdStateError } from './ha-errors.js'
import type { IndexedRun } from './handoff-runs.js'
import type { StateKey, StateLayout } from './state-layout.js'

/** A handoff run's value (state-layout.ts). */
const handoffRunValueSchema = z
  .object({ first: z.number().int().min(0).max(65535), count: z.number().int().min(1).max(65536), fromNode: nameSchema, generation: z.number().int().min(1) })
  .strict()

/** The meta key's value. */
export const metaValueSchema = z.object({ version: z.literal(2), meta: stateMetaSchema }).strict()

/** A zod issue as `field: message`. */
function issueText(error: z.ZodError): string {
  const issue = error.issues[0]
  if (issue === undefined) return 'is invalid'
  return issue.path.length > 0 ? `${issue.path.join('.')}: ${issue.message}` : issue.message
}

/** Parses one JSON value with `schema`, or throws naming the key. */
function parseValue<T>(layout: StateLayout, kv: EtcdKeyValue, schema: z.ZodType<T>, what: string): T {
  let raw: unknown
  try {
    raw = JSON.parse(kv.value.toString('utf8'))
  } catch {
    throw new EtcdStateError(layout.root, kv.key, `does not hold JSON (expected ${what})`)
  }
  const parsed = schema.safeParse(raw)
  if (!parsed.success) throw new EtcdStateError(layout.root, kv.key, `is not a valid ${what}: ${issueText(parsed.error)}`)
  return parsed.data
}

function expectEmpty(layout: StateLayout, kv: EtcdKeyValue): void {
  if (kv.value.length !== 0) throw new EtcdStateError(layout.root, kv.key, 'must have an empty value')
}

/** The generation of the meta among `entries`, or -1 when there is none or it is unreadable (for the reconcile). */
export function storedGeneration(layout: StateLayout, entries: readonly EtcdKeyValue[]): number {
  const kv = entries.find((e) => e.key === layout.meta())
  if (kv === undefined) return -1
  try {
    const parsed = metaValueSchema.safeParse(JSON.parse(kv.value.toString('utf8')))
    return parsed.success ? parsed.data.meta.generation : -1
  } catch {
    return -1
  }
}

/**
 * The state the entries hold, or null when there is no meta key (nothing was ever written, or only the
 * beginning of a first write that never completed: no answer was released from it). Throws EtcdStateError.
 */
export function decodeState(layout: StateLayout, entries: readonly EtcdKeyValue[]): DurableState | null {
  let meta: StateMeta | null = null
  const nodes: PersistedNode[] = []
  const draining: string[] = []
  const runs: IndexedRun[] = []
  const grants: number[] = []
  for (const kv of entries) {
    const key = layout.parse(kv.key)
    if (key === null) throw new EtcdStateError(layout.root, kv.key, 'is not a key this controller writes')
    switch (key.kind) {
      case 'meta':
        meta = parseValue(layout, kv, metaValueSchema, 'state meta').meta
        break
      case 'node': {
        const node = parseValue(layout, kv, persistedNodeSchema, 'node record')
        if (node.nodeId !== key.nodeId) throw new EtcdStateError(layout.root, kv.key, `holds the record of another node (${node.nodeId})`)
        nodes.push(node)
        break
      }
      case 'draining':
        expectEmpty(layout, kv)
        draining.push(key.nodeId)
        break
      case 'handoff':
      case 'handoff_run':
        runs.push(handoffEntry(layout, kv, key))
        break
      case 'grant':
        expectEmpty(layout, kv)
        grants.push(key.at)
        break
    }
  }
  if (meta === null) return null
  const handoffs = currentHandoffs(layout, runs, meta.generation)
  return checked(layout, { version: 2, meta, nodes, draining, handoffs, dailyGrants: grants.sort((a, b) => a - b) })
}

/** A handoff entry of either layout as a run, its value checked against its key. Throws EtcdStateError. */
export function handoffEntry(layout: StateLayout, kv: EtcdKeyValue, key: Extract<StateKey, { kind: 'handoff' | 'handoff_run' }>): IndexedRun {
  if (key.kind === 'handoff') {
    const h = parseValue(layout, kv, handoffSchema, 'pending handoff')
    if (h.shardId !== key.shardId || h.generation !== key.generation) {
      throw new EtcdStateError(layout.root, kv.key, `holds the handoff of shard ${h.shardId} at generation ${h.generation}`)
    }
    return { key: kv.key, first: h.shardId, count: 1, fromNode: h.fromNode, generation: h.generation }
  }
  const run = parseValue(layout, kv, handoffRunValueSchema, 'handoff run')
  if (run.first !== key.first || run.count !== key.count || run.generation !== key.generation) {
    throw new EtcdStateError(layout.root, kv.key, `holds the handoffs of shards ${run.first} (${run.count}) at generation ${run.generation}`)
  }
  if (run.first + run.count > 65_536) throw new EtcdStateError(layout.root, kv.key, 'holds a run that ends beyond shard 65535')
  return { key: kv.key, ...run }
}

/**
 * Per shard, the newest entry not newer than the meta's generation. Two entries of one shard and
 * generation name the same node (a shard gets one handoff per generation; the pieces of a partly
 * released run repeat it until the run's key is deleted); if they do not, the state is not ours.
 */
function currentHandoffs(layout: StateLayout, runs: readonly IndexedRun[], generation: number): PersistedHandoff[] {
  const byShard = new Map<number, PersistedHandoff>()
  for (const run of runs) {
    if (run.generation > generation) continue
    for (let shardId = run.first; shardId < run.first + run.count; shardId++) {
      const seen = byShard.get(shardId)
      if (seen !== undefined && seen.generation > run.generation) continue
      if (seen !== undefined && seen.generation === run.generation && seen.fromNode !== run.fromNode) {
        throw new EtcdStateError(layout.root, run.key, `says shard ${shardId} waits for ${run.fromNode} since generation ${run.generation}, another entry says ${seen.fromNode}`)
      }
      byShard.set(shardId, { shardId, fromNode: run.fromNode, generation: run.generation })
    }
  }
  return [...byShard.values()].sort((a, b) => a.shardId - b.shardId)
}

/** The whole state through the state schema too (e.g. shards beyond total_shards are caught by restore, not here). */
function checked(layout: StateLayout, state: DurableState): DurableState {
  const parsed = durableStateSchema.safeParse(state)
  if (!parsed.success) throw new EtcdStateError(layout.root, layout.root, `holds an invalid state: ${issueText(parsed.error)}`)
  return parsed.data
}
