/**
 * How the controller's durable state is laid out in etcd, under `<prefix>state/`: one key per node
 * record, per drain flag, per run of pending handoffs (contiguous shards waiting for one node since one
 * generation) and per grant counted against the daily budget, and one meta key (generation, plan
 * fingerprint, reshard barrier, CRL number). Pure: key names and value encodings only; see
 * etcd-state-store.ts for the reads and writes and README.md for the write order.
 *
 *   meta                                                {"version":2,"meta":{...StateMeta}}
 *   node/<node id>                                      PersistedNode as JSON
 *   draining/<node id>                                  (empty)
 *   handoff-run/<first:5>/<count:5>/<generation:16>     {first, count, fromNode, generation}
 *   grant/<time ms:16>/<unique id>                      (empty)
 *   handoff/<shard:5>/<generation:16>                   PersistedHandoff: written by earlier releases, still read
 *
 * Numbers in keys are zero-padded so that key order is numeric order: a range delete can drop every
 * grant before a time. The count is in a run's key so that the pieces a partial release leaves of a run
 * are new keys, written before the run they replace is deleted (state-writes.ts).
 */
import type { PersistedHandoff, PersistedNode, StateMeta } from '../core/durable-state.js'
import { isValidName } from '../core/names.js'

const SHARD_DIGITS = 5 // shard IDs are below 65536
const NUMBER_DIGITS = 16 // generations and epoch milliseconds, up to Number.MAX_SAFE_INTEGER

/** A key under `<prefix>state/`, as parsed. */
export type StateKey =
  | { readonly kind: 'meta' }
  | { readonly kind: 'node'; readonly nodeId: string }
  | { readonly kind: 'draining'; readonly nodeId: string }
  /** An entry of the per-shard layout of earlier releases (loaded, and replaced by runs on the next reconcile). */
  | { readonly kind: 'handoff'; readonly shardId: number; readonly generation: number }
  | { readonly kind: 'handoff_run'; readonly first: number; readonly count: number; readonly generation: number }
  | { readonly kind: 'grant'; readonly at: number }

function pad(n: number, digits: number, what: string): string {
  if (!Number.isSafeInteger(n) || n < 0 || n >= 10 ** digits) throw new RangeError(`${what} ${n} cannot be stored (an integer 0..${10 ** digits - 1})`)
  return String(n).padStart(digits, '0')
}

const HANDOFF_KEY = /^handoff\/(\d{5})\/(\d{16})$/
const HANDOFF_RUN_KEY = /^handoff-run\/(\d{5})\/(\d{5})\/(\d{16})$/
const GRANT_KEY = /^grant\/(\d{16})\/[0-9a-z.-]{1,64}$/

/** The key names of one deployment's state (`prefix` is the HA prefix, e.g. `/pxe/`). */
export class StateLayout {
  /** Every state key starts with this. */
  readonly root: string

  constructor(prefix: string) {
    this.root = `${prefix}state/`
  }

  meta(): string {
    return `${this.root}meta`
  }

  node(nodeId: string): string {
    return `${this.root}node/${nodeId}`
  }

  draining(nodeId: string): string {
    return `${this.root}draining/${nodeId}`
  }

  /** The key of shards first .. first + count - 1 waiting since `generation`. */
  handoffRun(first: number, count: number, generation: number): string {
    if (!Number.isSafeInteger(count) || count < 1 || first + count > 65_536) throw new RangeError(`a handoff run of ${count} shards from ${first} cannot be stored`)
    return `${this.root}handoff-run/${pad(first, SHARD_DIGITS, 'shard')}/${pad(count, SHARD_DIGITS, 'count')}/${pad(generation, NUMBER_DIGITS, 'generation')}`
  }

  /** A per-shard entry as earlier releases wrote it (tests write such states to check they still load). */
  legacyHandoff(shardId: number, generation: number): string {
    return `${this.root}handoff/${pad(shardId, SHARD_DIGITS, 'shard')}/${pad(generation, NUMBER_DIGITS, 'generation')}`
  }

  /** A counted grant at `at` (ms); `id` makes grants of one millisecond distinct keys. */
  grant(at: number, id: string): string {
    return `${this.root}grant/${pad(at, NUMBER_DIGITS, 'grant time')}/${id}`
  }

  /** `[from, to)` holding every grant before `cutoff` (ms). */
  grantsBefore(cutoff: number): { readonly key: string; readonly rangeEnd: string } {
    return { key: `${this.root}grant/`, rangeEnd: `${this.root}grant/${pad(Math.max(0, cutoff), NUMBER_DIGITS, 'grant time')}` }
  }

  /** What a key under `root` names, or null when it is not one of ours. */
  parse(key: string): StateKey | null {
    if (!key.startsWith(this.root)) return null
    const rest = key.slice(this.root.length)
    if (rest === 'meta') return { kind: 'meta' }
    const slash = rest.indexOf('/')
    if (slash < 0) return null
    const dir = rest.slice(0, slash)
    const name = rest.slice(slash + 1)
    if ((dir === 'node' || dir === 'draining') && isValidName(name)) return { kind: dir, nodeId: name }
    const handoff = HANDOFF_KEY.exec(rest)
    if (handoff) return { kind: 'handoff', shardId: Number(handoff[1]), generation: Number(handoff[2]) }
    const run = HANDOFF_RUN_KEY.exec(rest)
    if (run) return { kind: 'handoff_run', first: Number(run[1]), count: Number(run[2]), generation: Number(run[3]) }
    const grant = GRANT_KEY.exec(rest)
    if (grant) return { kind: 'grant', at: Number(grant[1]) }
    return null
  }
}

// The encoders list every field explicitly: equal states give byte-equal values (the reconcile compares them).

/** The meta key's value. */
export function encodeMeta(meta: StateMeta): string {
  const { generation, totalShards, maxConcurrency, planFingerprint, reshard, crlNumber, planner, liveReshard, configuredTotalShards, retired, revoked } = meta
  const barrier = reshard === null ? null : { generation: reshard.generation, waitingFor: [...reshard.waitingFor] }
  const fields: Record<string, unknown> = { generation, totalShards, maxConcurrency, planFingerprint, reshard: barrier, crlNumber }
  // The optional fields only when set: states without them keep their bytes.
  if (planner !== undefined) fields['planner'] = planner
  if (liveReshard !== undefined) {
    const { fromTotalShards, toTotalShards, startedAt, changedAt, handoffs, ranges } = liveReshard
    const next: Record<string, unknown> = { fromTotalShards, toTotalShards, startedAt, changedAt, handoffs: handoffs.map((run) => [...run]) }
    if (ranges !== undefined) next['ranges'] = ranges.map((range) => [...range])
    fields['liveReshard'] = next
  }
  if (configuredTotalShards !== undefined) fields['configuredTotalShards'] = configuredTotalShards
  if (retired !== undefined) fields['retired'] = { totalShards: retired.totalShards, generation: retired.generation, waitingFor: [...retired.waitingFor] }
  if (revoked !== undefined) fields['revoked'] = revoked.map((holder) => [...holder])
  return JSON.stringify({ version: 2, meta: fields })
}

/** A node record's value. */
export function encodeNode(n: PersistedNode): string {
  return JSON.stringify({
    nodeId: n.nodeId,
    capacity: n.capacity,
    reportedGeneration: n.reportedGeneration,
    certSerial: n.certSerial,
    certNotBefore: n.certNotBefore,
    readyShards: n.readyShards,
    startingShards: n.startingShards,
    backoffShards: n.backoffShards,
    fatalShards: n.fatalShards,
    // Only under the stable planner (undefined is left out by JSON.stringify).
    range: n.range === undefined ? undefined : [n.range[0], n.range[1]],
  })
}

/** A pending handoff's value in the per-shard layout of earlier releases (tests write such states). */
export function encodeHandoff(h: PersistedHandoff): string {
  return JSON.stringify({ shardId: h.shardId, fromNode: h.fromNode, generation: h.generation })
}

/** A run of pending handoffs: shards first .. first + count - 1 waiting for `fromNode` since `generation`. */
export interface StoredHandoffRun {
  readonly first: number
  readonly count: number
  readonly fromNode: string
  readonly generation: number
}

/** A handoff run's value. */
export function encodeHandoffRun(r: StoredHandoffRun): string {
  return JSON.stringify({ first: r.first, count: r.count, fromNode: r.fromNode, generation: r.generation })
}

/** The value of flag-like keys (drain flags, grants): the key says it all. */
export const EMPTY_VALUE = ''
