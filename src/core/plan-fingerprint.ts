/**
 * A fingerprint of a plan's ranges, persisted instead of the ranges themselves: a restore recomputes
 * the plan from the restored nodes and compares. Deterministic (SHA-256 over a canonical text); no I/O.
 */
import { createHash } from 'node:crypto'
import type { NodeRange } from './types.js'

/** SHA-256 hex of `id:start:count` lines, in the map's order (the planner's byte order). */
export function planFingerprint(ranges: Iterable<readonly [string, NodeRange]>): string {
  const hash = createHash('sha256')
  for (const [nodeId, { rangeStart, rangeCount }] of ranges) hash.update(`${nodeId}:${rangeStart}:${rangeCount}\n`)
  return hash.digest('hex')
}
