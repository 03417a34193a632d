/**
 * A fingerprint of a plan's ranges, persisted instead of the ranges themselves: a restore recomputes
 * the plan from the restored nodes and compares. Deterministic (SHA-256 over a canonical encoding); no I/O.
 */
import { createHash } from 'node:crypto'
import type { NodeRange } from './types.js'

let scratch = Buffer.alloc(64 * 1024)

/**
 * SHA-256 hex over, per range in the map's order (the planner's byte order): the node ID (name-rule
 * characters, so ASCII), a 0 byte, then start and count as 32-bit little-endian integers. Encoded into one
 * reused buffer and hashed once: at N = 10,000 a string per node cost more than the re-plan itself.
 */
export function planFingerprint(ranges: Iterable<readonly [string, NodeRange]>): string {
  const ids: string[] = []
  const starts: number[] = []
  const counts: number[] = []
  for (const [nodeId, { rangeStart, rangeCount }] of ranges) {
    ids.push(nodeId)
    starts.push(rangeStart)
    counts.push(rangeCount)
  }
  return planFingerprintInOrder(ids, starts, counts)
}

/** The same fingerprint over parallel arrays (the controller's own form of a plan). */
export function planFingerprintInOrder(ids: readonly string[], starts: ArrayLike<number>, counts: ArrayLike<number>): string {
  let at = 0
  for (let i = 0; i < ids.length; i++) {
    const nodeId = ids[i]!
    if (at + nodeId.length + 9 > scratch.length) {
      const grown = Buffer.alloc(scratch.length * 2 + nodeId.length + 9)
      scratch.copy(grown, 0, 0, at)
      scratch = grown
    }
    at += scratch.write(nodeId, at, 'latin1')
    scratch[at++] = 0
    at = scratch.writeInt32LE(starts[i]!, at)
    at = scratch.writeInt32LE(counts[i]!, at)
  }
  return createHash('sha256').update(scratch.subarray(0, at)).digest('hex')
}

/**
 * planFingerprintInOrder for a controller that fingerprints the same order of nodes again and again
 * (every drain, every capacity change): the names are encoded once per order, then only the 8 bytes of
 * each range are rewritten. Same bytes, same hash. The layout is kept per order *array*: the controller
 * replaces its order array whenever nodes join or leave and never changes one in place. Names follow
 * the name rule (ASCII), so a name's length is its latin1 byte length.
 */
export class PlanFingerprinter {
  private order: readonly string[] | null = null
  private bytes = Buffer.alloc(0)
  /** Byte offset of each node's rangeStart field. */
  private slots = new Int32Array(0)

  fingerprint(ids: readonly string[], starts: ArrayLike<number>, counts: ArrayLike<number>): string {
    if (ids !== this.order) this.layout(ids)
    const bytes = this.bytes
    for (let i = 0; i < ids.length; i++) {
      writeLE32(bytes, this.slots[i]!, starts[i]!)
      writeLE32(bytes, this.slots[i]! + 4, counts[i]!)
    }
    return createHash('sha256').update(bytes).digest('hex')
  }

  private layout(ids: readonly string[]): void {
    let size = 0
    for (const nodeId of ids) size += nodeId.length + 9
    const bytes = Buffer.alloc(size)
    const slots = new Int32Array(ids.length)
    let at = 0
    // Byte by byte, not bytes.write per name: at N = 10,000 the native call per name cost ~2 ms of
    // every join (a new order, so a new layout). Names are ASCII (the name rule): a char is its byte.
    for (let i = 0; i < ids.length; i++) {
      const nodeId = ids[i]!
      for (let k = 0; k < nodeId.length; k++) bytes[at++] = nodeId.charCodeAt(k)
      bytes[at++] = 0
      slots[i] = at
      at += 8
    }
    this.order = ids
    this.bytes = bytes
    this.slots = slots
  }
}

/** A 32-bit little-endian integer (two's complement), as Buffer.writeInt32LE writes it. */
function writeLE32(bytes: Buffer, at: number, value: number): void {
  bytes[at] = value & 0xff
  bytes[at + 1] = (value >>> 8) & 0xff
  bytes[at + 2] = (value >>> 16) & 0xff
  bytes[at + 3] = (value >>> 24) & 0xff
}
