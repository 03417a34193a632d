/**
 * How the controller's durable state is laid out in etcd, under `<prefix>state/`: one key per node
 * record, per drain flag, per pending handoff and per grant counted against the daily budget, and one
 * meta key (generation, plan fingerprint, reshard barrier, CRL number). Pure: key names and value
 * encodings only; see etcd-state-store.ts for the reads and writes and README.md for the write order.
 *
 *   meta                              {"version":2,"meta":{...StateMeta}}
 *   node/<node id>                    PersistedNode as JSON
 *   draining/<node id>                (empty)
 *   handoff/<shard:5>/<generation:16> PersistedHandoff as JSON
 *   grant/<time ms:16>/<unique id>    (empty)
 *
 * Numbers in keys are zero-padded so that key order is numeric order: a range delete can drop every
 * grant before a time, or every handoff of a shard older than a generation.
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
  | { readonly kind: 'handoff'; readonly shardId: number; readonly generation: number }
  | { readonly kind: 'grant'; readonly at: number }

function pad(n: number, digits: number, what: string): string {
  if (!Number.isSafeInteger(n) || n < 0 || n >= 10 ** digits) throw new RangeError(`${what} ${n} cannot be stored (an integer 0..${10 ** digits - 1})`)
  return String(n).padStart(digits, '0')
}

const HANDOFF_KEY = /^handoff\/(\d{5})\/(\d{16})$/
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

  handoff(shardId: number, generation: number): string {
    return `${this.handoffsOf(shardId)}${pad(generation, NUMBER_DIGITS, 'generation')}`
  }

  /** The prefix of every entry of one shard. */
  handoffsOf(shardId: number): string {
    return `${this.root}handoff/${pad(shardId, SHARD_DIGITS, 'shard')}/`
  }

  /** `[from, to)` holding a shard's entries of generations below `generation`. */
  handoffsBefore(shardId: number, generation: number): { readonly key: string; readonly rangeEnd: string } {
    return { key: this.handoffsOf(shardId), rangeEnd: this.handoff(shardId, generation) }
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
    const grant = GRANT_KEY.exec(rest)
    if (grant) return { kind: 'grant', at: Number(grant[1]) }
    return null
  }
}

// The encoders list every field explicitly: equal states give byte-equal values (the reconcile compares them).

/** The meta key's value. */
export function encodeMeta(meta: StateMeta): string {
  const { generation, totalShards, maxConcurrency, planFingerprint, reshard, crlNumber, planner } = meta
  const barrier = reshard === null ? null : { generation: reshard.generation, waitingFor: [...reshard.waitingFor] }
  const fields = { generation, totalShards, maxConcurrency, planFingerprint, reshard: barrier, crlNumber }
  // `planner` only when set (the stable planner): contiguous states keep their bytes.
  return JSON.stringify({ version: 2, meta: planner === undefined ? fields : { ...fields, planner } })
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

/** A pending handoff's value. */
export function encodeHandoff(h: PersistedHandoff): string {
  return JSON.stringify({ shardId: h.shardId, fromNode: h.fromNode, generation: h.generation })
}

/** The value of flag-like keys (drain flags, grants): the key says it all. */
export const EMPTY_VALUE = ''
