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
  let at = 0
  for (const [nodeId, { rangeStart, rangeCount }] of ranges) {
    if (at + nodeId.length + 9 > scratch.length) {
      const grown = Buffer.alloc(scratch.length * 2 + nodeId.length + 9)
      scratch.copy(grown, 0, 0, at)
      scratch = grown
    }
    at += scratch.write(nodeId, at, 'latin1')
    scratch[at++] = 0
    at = scratch.writeInt32LE(rangeStart, at)
    at = scratch.writeInt32LE(rangeCount, at)
  }
  return createHash('sha256').update(scratch.subarray(0, at)).digest('hex')
}
