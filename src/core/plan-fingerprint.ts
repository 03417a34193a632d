/**
 * A fingerprint of a plan's ranges, persisted instead of the ranges themselves: a restore recomputes
 * the plan from the restored nodes and compares. Deterministic (SHA-256 over a canonical text); no I/O.
 */
import { createHash } from 'node:crypto'
import type { NodeRange } from './types.js'

/** SHA-256 hex of `id:start:count` lines, in the map's order (the planner's byte order). */
export function planFingerprint(ranges: Iterable<readonly [string, NodeRange]>): string {
  const lines: string[] = []
  for (const [nodeId, { rangeStart, rangeCount }] of ranges) lines.push(`${nodeId}:${rangeStart}:${rangeCount}\n`)
  // One update for the whole text: an update per node costs a native call each (10x slower at N = 10,000).
  return createHash('sha256').update(lines.join('')).digest('hex')
}
