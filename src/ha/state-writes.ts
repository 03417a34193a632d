/**
 * The etcd operations that make a state change durable, in the order that keeps every prefix of them
 * a state a new leader can safely start from (the argument is in README.md, "Write order"):
 *
 *   1. additions that only make a new leader more careful: counted grants, new handoff runs, and the
 *      pieces that remain of runs partly released or superseded (they repeat what those runs say)
 *   2. node records and drain flags (puts and deletes)
 *   3. the meta key (generation, plan fingerprint, reshard barrier, CRL number)
 *   4. releases, justified by 2 and 3: the keys of handoff runs released, superseded or split
 *   5. grants that left the daily window
 *
 * A large change is split into several transactions in this order (fencedPhases); they are not atomic
 * together, the order is what makes that safe. Within a phase the order does not matter: any subset of
 * a phase's operations, on top of every earlier phase, is as safe as a prefix (each operation of a phase
 * is justified by the phases before it alone), so the transactions of one phase are sent together.
 * Pure: the store sends what these return.
 */
import type { DurableState, StateDelta } from '../core/durable-state.js'
import type { EtcdKeyValue } from './etcd-api.js'
import type { WriteOp } from './etcd-limits.js'
import { reconcileHandoffRuns, type HandoffRunIndex, type IndexedRun } from './handoff-runs.js'
import { handoffEntry, storedGeneration } from './state-decode.js'
import { EMPTY_VALUE, encodeMeta, encodeNode, type StateLayout } from './state-layout.js'

/** What the writes need besides the change: the key layout and a fresh ID per counted grant. */
export interface WriteContext {
  readonly layout: StateLayout
  /** Unique among every grant ever written (e.g. the term's election revision and a counter). */
  readonly grantId: () => string
}

type Phases = [additions: WriteOp[], records: WriteOp[], meta: WriteOp[], releases: WriteOp[], drops: WriteOp[]]

const put = (key: string, value: string): WriteOp => ({ type: 'put', key, value })
const del = (key: string): WriteOp => ({ type: 'delete', key })
const phases = (): Phases => [[], [], [], [], []]

/** Operations grouped by write phase, the phases in write order (see the top of this file). */
export type WritePhases = readonly (readonly WriteOp[])[]

/** The operations of one delta in write order (deltaPhases, flattened). */
export function deltaWrites(delta: StateDelta, ctx: WriteContext, runs: HandoffRunIndex): WriteOp[] {
  return deltaPhases(delta, ctx, runs).flat()
}

/**
 * The operations of one delta, by phase. `runs` is the index of the handoff runs etcd holds (as of the
 * last committed write): it is updated to what etcd holds once these operations committed.
 */
export function deltaPhases(delta: StateDelta, ctx: WriteContext, runs: HandoffRunIndex): WritePhases {
  const { layout } = ctx
  const [additions, records, meta, releases, drops] = phases()
  for (const at of delta.addGrants) additions.push(put(layout.grant(at, ctx.grantId()), EMPTY_VALUE))
  const handoffs = runs.change(delta.putHandoffs, delta.deleteHandoffs)
  additions.push(...handoffs.puts)
  for (const n of delta.putNodes) records.push(put(layout.node(n.nodeId), encodeNode(n)))
  for (const id of delta.deleteNodes) records.push(del(layout.node(id)))
  for (const id of delta.putDraining) records.push(put(layout.draining(id), EMPTY_VALUE))
  for (const id of delta.deleteDraining) records.push(del(layout.draining(id)))
  meta.push(put(layout.meta(), encodeMeta(delta.meta)))
  releases.push(...handoffs.deletes)
  if (delta.dropGrantsBefore !== null) drops.push({ type: 'delete_range', ...layout.grantsBefore(delta.dropGrantsBefore) })
  return [additions, records, meta, releases, drops]
}

/** A reconcile's operations by phase, and the handoff runs etcd holds once they committed. */
export interface Reconcile {
  readonly phases: WritePhases
  readonly runs: HandoffRunIndex
}

/**
 * The operations that turn what etcd holds (`current`, read at one revision) into `full`, in write order;
 * only what differs is written. Handoff entries newer than the stored meta's generation are invisible to
 * a load (a write whose meta never landed) and are deleted first, before a new meta could make them count.
 * Unreadable ones (a load refuses them, so no leader can start from a prefix that still holds one) go
 * with the releases, after the runs that replace them. Either kind, and a stored run that is released,
 * under a key the reconcile puts again (same shards and generation, another previous owner) is not
 * deleted: the put replaces it (a delete after the put would lose the handoff, and etcd refuses a
 * put and a delete of one key in one transaction). Handoff runs that still say what `full` says stay;
 * per-shard entries of earlier releases become runs.
 */
export function reconcileWrites(current: readonly EtcdKeyValue[], full: DurableState, ctx: WriteContext): Reconcile {
  const { layout } = ctx
  const [additions, records, meta, releases, drops] = phases()
  const invisible: string[] = []
  const unreadable: string[] = []
  const want = wantedValues(full, layout)
  const storedGen = storedGeneration(layout, current)
  const wantGrants = countTimes(full.dailyGrants)
  const have = new Set<string>()
  const storedRuns: IndexedRun[] = []
  for (const kv of current) {
    const key = layout.parse(kv.key)
    if (key?.kind === 'handoff' || key?.kind === 'handoff_run') {
      const generation = key.generation
      if (generation > storedGen) invisible.push(kv.key)
      else {
        try {
          storedRuns.push(handoffEntry(layout, kv, key))
        } catch {
          unreadable.push(kv.key) // the load would refuse it; the runs below replace it
        }
      }
      continue
    }
    if (key?.kind === 'grant') {
      const left = wantGrants.get(key.at) ?? 0
      if (left > 0) wantGrants.set(key.at, left - 1)
      else drops.push(del(kv.key)) // a surplus grant: the budget is counted from `full`
      continue
    }
    const wanted = want.get(kv.key)
    if (wanted !== undefined && kv.value.equals(Buffer.from(wanted, 'utf8'))) {
      have.add(kv.key)
      continue
    }
    if (wanted !== undefined) continue // rewritten below, in its phase
    if (key?.kind === 'node' || key?.kind === 'draining') records.push(del(kv.key))
    else if (key?.kind !== 'meta') releases.push(del(kv.key)) // not ours: removed once the state is whole
  }
  for (const [at, count] of wantGrants) for (let i = 0; i < count; i++) additions.push(put(layout.grant(at, ctx.grantId()), EMPTY_VALUE))
  for (const [key, value] of want) {
    if (have.has(key)) continue
    ;(layout.parse(key)?.kind === 'meta' ? meta : records).push(put(key, value))
  }
  const handoffs = reconcileHandoffRuns(layout, storedRuns, full.handoffs)
  additions.push(...handoffs.puts)
  const putAgain = new Set(handoffs.puts.flatMap((op) => (op.type === 'put' ? [op.key] : [])))
  const deleted = (keys: readonly string[]) => keys.filter((key) => !putAgain.has(key)).map((key) => del(key))
  const released = handoffs.deletes.flatMap((op) => (op.type === 'delete' ? [op.key] : []))
  releases.push(...deleted([...unreadable, ...released]))
  return { phases: [deleted(invisible), additions, records, meta, releases, drops], runs: handoffs.index }
}

/** Every key of `state` but its grants and handoffs, with its encoded value. */
function wantedValues(state: DurableState, layout: StateLayout): Map<string, string> {
  const want = new Map<string, string>([[layout.meta(), encodeMeta(state.meta)]])
  for (const n of state.nodes) want.set(layout.node(n.nodeId), encodeNode(n))
  for (const id of state.draining) want.set(layout.draining(id), EMPTY_VALUE)
  return want
}

function countTimes(times: readonly number[]): Map<number, number> {
  const counts = new Map<number, number>()
  for (const t of times) counts.set(t, (counts.get(t) ?? 0) + 1)
  return counts
}
