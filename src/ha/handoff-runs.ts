/**
 * The pending handoffs etcd holds, as the keys that hold them: disjoint runs of contiguous shards waiting
 * for one node since one generation (state-layout.ts). A delta names shards, not keys, so the store keeps
 * this index of its own keys to know which runs a change touches: a run partly released or superseded is
 * replaced by the pieces that remain, new keys written before the run's key is deleted (state-writes.ts
 * says why that order is safe). Pure: it computes operations; the store sends them.
 *
 * The index is exact only after a committed write; after a failed one the store reconciles, which reads
 * etcd and builds a fresh index (`reconcileHandoffRuns`).
 */
import type { HandoffRun, PersistedHandoff, ShardRun } from '../core/durable-state.js'
import type { WriteOp } from './etcd-limits.js'
import { encodeHandoffRun, type StateLayout, type StoredHandoffRun } from './state-layout.js'

const MAX_SHARDS = 65_536
const NO_RUN = -1

/** A run as etcd holds it, with its key (a run of earlier releases' per-shard layout has count 1). */
export interface IndexedRun extends StoredHandoffRun {
  readonly key: string
}

/** The operations of one change to the runs: puts go with the additions, deletes with the releases. */
export interface RunWrites {
  readonly puts: WriteOp[]
  readonly deletes: WriteOp[]
}

/** The runs one store term wrote or found, disjoint, with a per-shard lookup (what covers shard s). */
export class HandoffRunIndex {
  private readonly runAt = new Int32Array(MAX_SHARDS).fill(NO_RUN)
  private readonly runs = new Map<number, IndexedRun>()
  private nextId = 0

  constructor(private readonly layout: StateLayout) {}

  /** How many keys hold handoffs. */
  get size(): number {
    return this.runs.size
  }

  /** The runs in shard order. */
  list(): IndexedRun[] {
    return [...this.runs.values()].sort((a, b) => a.first - b.first)
  }

  /** Adds a run that etcd holds (it must not overlap one already here). */
  adopt(run: IndexedRun): void {
    const id = this.nextId++
    this.runs.set(id, run)
    this.runAt.fill(id, run.first, run.first + run.count)
  }

  /**
   * Applies one delta's handoff changes (each shard in at most one of the two lists, as the state tracker
   * makes them) and returns the writes that make etcd hold the new runs: the new runs and the remaining
   * pieces of touched runs as puts, the touched runs' keys as deletes.
   */
  change(putRuns: readonly HandoffRun[], releaseRuns: readonly ShardRun[]): RunWrites {
    // keys this change puts, and keys of etcd it deletes; a key both removed and put back is left alone
    const added = new Map<string, IndexedRun>()
    const removed = new Map<string, IndexedRun>()
    const add = (first: number, count: number, fromNode: string, generation: number): void => {
      const run: IndexedRun = { key: this.layout.handoffRun(first, count, generation), first, count, fromNode, generation }
      this.adopt(run)
      // a key this change deleted comes back: never delete it then; rewrite it only if its value differs
      const before = removed.get(run.key)
      removed.delete(run.key)
      if (before === undefined || before.fromNode !== fromNode) added.set(run.key, run)
    }
    const cut = (first: number, count: number): void => {
      const end = first + count
      let shardId = first
      while (shardId < end) {
        const id = this.runAt[shardId]!
        if (id === NO_RUN) {
          shardId += 1
          continue
        }
        const run = this.runs.get(id)!
        const runEnd = run.first + run.count
        this.runs.delete(id)
        this.runAt.fill(NO_RUN, run.first, runEnd)
        if (added.delete(run.key) === false) removed.set(run.key, run)
        if (run.first < first) add(run.first, first - run.first, run.fromNode, run.generation)
        if (runEnd > end) add(end, runEnd - end, run.fromNode, run.generation)
        shardId = runEnd
      }
    }
    for (const [first, count] of releaseRuns) cut(first, count)
    for (const [first, count, fromNode, generation] of putRuns) {
      cut(first, count)
      add(first, count, fromNode, generation)
    }
    const byShard = (a: IndexedRun, b: IndexedRun) => a.first - b.first || a.generation - b.generation
    const puts: WriteOp[] = [...added.values()].sort(byShard).map((run) => ({ type: 'put', key: run.key, value: encodeHandoffRun(run) }))
    const deletes: WriteOp[] = [...removed.values()].sort(byShard).map((run) => ({ type: 'delete', key: run.key }))
    return { puts, deletes }
  }
}

/** `handoffs` (one per shard, any order) grouped into runs of consecutive shards with one node and generation. */
export function groupHandoffs(handoffs: readonly PersistedHandoff[]): StoredHandoffRun[] {
  const sorted = [...handoffs].sort((a, b) => a.shardId - b.shardId)
  const runs: StoredHandoffRun[] = []
  let open: { first: number; count: number; fromNode: string; generation: number } | null = null
  for (const h of sorted) {
    if (open !== null && h.shardId === open.first + open.count && h.fromNode === open.fromNode && h.generation === open.generation) {
      open.count += 1
      continue
    }
    if (open !== null) runs.push(open)
    open = { first: h.shardId, count: 1, fromNode: h.fromNode, generation: h.generation }
  }
  if (open !== null) runs.push(open)
  return runs
}

/**
 * The reconcile's part for handoffs: of the runs etcd holds (`stored`, in key order, each with its value
 * already checked), those in the run layout that say exactly what `wanted` says for each of their shards
 * and overlap no run kept before them stay; the others (and every per-shard entry of earlier releases)
 * are deleted; the shards `wanted` holds that no kept run covers are put as new runs. Returns the writes and the index etcd holds once they committed.
 */
export function reconcileHandoffRuns(
  layout: StateLayout,
  stored: readonly IndexedRun[],
  wanted: readonly PersistedHandoff[],
): RunWrites & { readonly index: HandoffRunIndex } {
  const want = new Map<number, PersistedHandoff>()
  for (const h of wanted) want.set(h.shardId, h)
  const index = new HandoffRunIndex(layout)
  const covered = new Uint8Array(MAX_SHARDS)
  const deletes: WriteOp[] = []
  for (const run of stored) {
    // an entry of the per-shard layout of earlier releases is rewritten as part of a run
    let keep = run.key === layout.handoffRun(run.first, run.count, run.generation)
    for (let shardId = run.first; keep && shardId < run.first + run.count; shardId++) {
      const h = want.get(shardId)
      keep = covered[shardId] === 0 && h !== undefined && h.fromNode === run.fromNode && h.generation === run.generation
    }
    if (!keep) {
      deletes.push({ type: 'delete', key: run.key })
      continue
    }
    covered.fill(1, run.first, run.first + run.count)
    index.adopt(run)
  }
  const puts: WriteOp[] = []
  for (const run of groupHandoffs(wanted.filter((h) => covered[h.shardId] === 0))) {
    const key = layout.handoffRun(run.first, run.count, run.generation)
    index.adopt({ key, ...run })
    puts.push({ type: 'put', key, value: encodeHandoffRun(run) })
  }
  return { puts, deletes, index }
}
