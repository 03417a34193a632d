/**
 * The version-1 state file body that earlier releases wrote (ranges stored per node): its zod schema, and
 * its conversion to the current DurableState. Read back on the first start after an upgrade; never written.
 */
import { z } from 'zod'
import { handoffSchema, durableStateSchema, persistedNodeSchema, type Same } from './durable-state-schema.js'
import type { DurableState, PersistedNode } from './durable-state.js'
import { nameSchema } from './names.js'
import { planFingerprint } from './plan-fingerprint.js'
import type { SnapshotV1 } from './types.js'

const nonNegativeInt = z.number().int().min(0)

/** The persisted controller state (version 1), strict at every level. */
export const controllerSnapshotSchema = z
  .object({
    version: z.literal(1),
    generation: nonNegativeInt,
    totalShards: z.number().int().min(1).max(65536),
    nodes: z.array(persistedNodeSchema.extend({ rangeStart: nonNegativeInt.max(65536), rangeCount: nonNegativeInt.max(128) }).strict()),
    draining: z.array(nameSchema),
    handoffs: z.array(handoffSchema),
    dailyGrants: z.array(z.number().int()),
    // RFC 5280 caps CRL numbers at 20 octets (49 decimal digits); optional so older state files load.
    crlNumber: z.string().regex(/^(0|[1-9][0-9]{0,48})$/, 'must be a decimal CRL number').optional(),
  })
  .strict()

/** A version-1 snapshot (ranges per node) as the same state in version 2; its plan fingerprint from its ranges. */
export function fromVersion1(snapshot: SnapshotV1): DurableState {
  const byId = [...snapshot.nodes].sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0))
  const nodes: PersistedNode[] = byId.map(({ rangeStart: _s, rangeCount: _c, ...node }) => node)
  return {
    version: 2,
    meta: {
      generation: snapshot.generation,
      totalShards: snapshot.totalShards,
      maxConcurrency: null, // not recorded then: taken as unchanged
      planFingerprint: planFingerprint(byId.map((n) => [n.nodeId, n] as const)),
      reshard: null,
      crlNumber: snapshot.crlNumber ?? null,
    },
    nodes,
    draining: [...snapshot.draining],
    handoffs: [...snapshot.handoffs],
    dailyGrants: [...snapshot.dailyGrants],
  }
}

/** Parses a state read back from a store: version 2, or version 1 converted. */
export function parseStoredState(value: unknown): { success: true; data: DurableState } | { success: false; error: z.ZodError } {
  const v2 = durableStateSchema.safeParse(value)
  if (v2.success) return { success: true, data: v2.data }
  const v1 = controllerSnapshotSchema.safeParse(value)
  if (v1.success) return { success: true, data: fromVersion1(v1.data as SnapshotV1) }
  return { success: false, error: (value as { version?: unknown })?.version === 1 ? v1.error : v2.error }
}


// Compile-time guard: the schema and the SnapshotV1 type must not drift apart.
const snapshotMatches: Same<keyof z.infer<typeof controllerSnapshotSchema>, keyof SnapshotV1> = true
void snapshotMatches
