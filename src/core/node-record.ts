/** The controller's record of a live node (SPEC "Controller state") and its outward views. */
import type { PersistedNode } from './durable-state.js'
import type { CertRef, NodeRange, PlanNodeView } from './types.js'
import type { CheckinBody } from './schemas.js'

/** Mutable state of one live node; the range lives in the plan, the drain flag in the drain set. */
export interface NodeRecord {
  readonly nodeId: string
  capacity: number
  lastSeen: number
  reportedGeneration: number | null
  certSerial: string
  certNotBefore: number
  /** When that certificate expires (ms), or null after a restore until the next check-in. Memory only. */
  certNotAfter: number | null
  readyShards: number
  startingShards: number
  backoffShards: number
  fatalShards: number
  /**
   * True once a check-in carried `next_ready_shards`: the node's agent knows live resharding (an older one
   * refuses every plan with a next set, and its fail-safe would stop its shards). Memory only.
   */
  knowsNext: boolean
}

/** A fresh record from a node's first check-in. */
export function newNodeRecord(now: number, body: CheckinBody, cert: CertRef): NodeRecord {
  return {
    nodeId: body.node_id,
    capacity: body.capacity,
    lastSeen: now,
    reportedGeneration: body.generation ?? null,
    certSerial: cert.serial,
    certNotBefore: cert.notBefore,
    certNotAfter: cert.notAfter ?? null,
    readyShards: body.ready_shards,
    startingShards: body.starting_shards,
    backoffShards: body.backoff_shards,
    fatalShards: body.fatal_shards,
    knowsNext: body.next_ready_shards !== undefined,
  }
}

/** Copies a check-in into a record (the lease renewed); true when a persisted field (capacity, certificate) changed. */
export function renewRecord(record: NodeRecord, now: number, body: CheckinBody, cert: CertRef): boolean {
  const changed = record.capacity !== body.capacity || record.certSerial !== cert.serial
  record.capacity = body.capacity
  record.certSerial = cert.serial
  record.certNotBefore = cert.notBefore
  record.certNotAfter = cert.notAfter ?? null
  record.lastSeen = now
  record.readyShards = body.ready_shards
  record.startingShards = body.starting_shards
  record.backoffShards = body.backoff_shards
  record.fatalShards = body.fatal_shards
  if (body.next_ready_shards !== undefined) record.knowsNext = true
  return changed
}

/** A record restored from the durable state; its lease counts from `now` (the restart). */
export function restoredNodeRecord(now: number, node: PersistedNode): NodeRecord {
  return {
    nodeId: node.nodeId,
    capacity: node.capacity,
    lastSeen: now,
    reportedGeneration: node.reportedGeneration,
    certSerial: node.certSerial,
    certNotBefore: node.certNotBefore,
    certNotAfter: null,
    readyShards: node.readyShards,
    startingShards: node.startingShards,
    backoffShards: node.backoffShards,
    fatalShards: node.fatalShards,
    knowsNext: false, // until its first check-in after the restart says
  }
}

/** The persisted form of a record; `range` only under the stable planner (the contiguous one recomputes it). */
export function persistedNode(record: NodeRecord, range?: NodeRange): PersistedNode {
  if (range === undefined) {
    return {
      nodeId: record.nodeId,
      capacity: record.capacity,
      reportedGeneration: record.reportedGeneration,
      certSerial: record.certSerial,
      certNotBefore: record.certNotBefore,
      readyShards: record.readyShards,
      startingShards: record.startingShards,
      backoffShards: record.backoffShards,
      fatalShards: record.fatalShards,
    }
  }
  // One literal (range last, as before), not a spread of the one above: a spread per node made a
  // stable-planner snapshot at N = 10,000 cost ~20 ms of a compaction.
  return {
    nodeId: record.nodeId,
    capacity: record.capacity,
    reportedGeneration: record.reportedGeneration,
    certSerial: record.certSerial,
    certNotBefore: record.certNotBefore,
    readyShards: record.readyShards,
    startingShards: record.startingShards,
    backoffShards: record.backoffShards,
    fatalShards: record.fatalShards,
    range: [range.rangeStart, range.rangeCount],
  }
}

/** The operator's view of a record (GET /v1/plan). */
export function planNodeView(record: NodeRecord, range: NodeRange, draining: boolean, pendingHandoffs: number, next: PlanNodeView['next'] = null, rest: PlanNodeView['rest'] = null): PlanNodeView {
  return {
    nodeId: record.nodeId,
    capacity: record.capacity,
    draining,
    rangeStart: range.rangeStart,
    rangeCount: range.rangeCount,
    lastSeen: record.lastSeen,
    generation: record.reportedGeneration,
    readyShards: record.readyShards,
    startingShards: record.startingShards,
    backoffShards: record.backoffShards,
    fatalShards: record.fatalShards,
    pendingHandoffs,
    certNotAfter: record.certNotAfter,
    next,
    rest,
  }
}
