/**
 * zod schemas of what a state store reads back (DurableState, StateDelta, and the version-1 snapshot that
 * earlier releases wrote), and the conversion of a version-1 snapshot. Stores validate what they READ;
 * what the controller itself produces is typed, and a test keeps both in step.
 */
import { z } from 'zod'
import { nameSchema } from './names.js'
import { planFingerprint } from './plan-fingerprint.js'
import type { DurableState, PersistedNode, StateDelta } from './durable-state.js'
import { controllerSnapshotSchema } from './snapshot-schema.js'
import type { ControllerSnapshot } from './types.js'

const nonNegativeInt = z.number().int().min(0)
const count = nonNegativeInt.max(128)

/** One persisted node record. */
export const persistedNodeSchema = z
  .object({
    nodeId: nameSchema,
    capacity: z.number().int().min(1).max(128),
    reportedGeneration: nonNegativeInt.nullable(),
    certSerial: z.string().regex(/^[0-9a-f]{1,128}$/, 'must be lower-case hex'),
    certNotBefore: z.number().int(),
    readyShards: count,
    startingShards: count,
    backoffShards: count,
    fatalShards: count,
  })
  .strict()

/** One pending handoff. */
export const handoffSchema = z
  .object({ shardId: nonNegativeInt.max(65535), fromNode: nameSchema, generation: z.number().int().min(1) })
  .strict()

export const stateMetaSchema = z
  .object({
    generation: nonNegativeInt,
    totalShards: z.number().int().min(1).max(65536),
    maxConcurrency: z.number().int().min(1).max(65536).nullable(),
    planFingerprint: z.string().regex(/^[0-9a-f]{64}$/),
    reshard: z.object({ generation: z.number().int().min(1), waitingFor: z.array(nameSchema) }).strict().nullable(),
    crlNumber: z.string().regex(/^(0|[1-9][0-9]{0,48})$/, 'must be a decimal CRL number').nullable(),
  })
  .strict()

/** The whole durable state (version 2). */
export const durableStateSchema = z
  .object({
    version: z.literal(2),
    meta: stateMetaSchema,
    nodes: z.array(persistedNodeSchema),
    draining: z.array(nameSchema),
    handoffs: z.array(handoffSchema),
    dailyGrants: z.array(z.number().int()),
  })
  .strict()

/** One journalled change. */
export const stateDeltaSchema = z
  .object({
    meta: stateMetaSchema,
    putNodes: z.array(persistedNodeSchema),
    deleteNodes: z.array(nameSchema),
    putDraining: z.array(nameSchema),
    deleteDraining: z.array(nameSchema),
    putHandoffs: z.array(handoffSchema),
    deleteHandoffs: z.array(nonNegativeInt.max(65535)),
    addGrants: z.array(z.number().int()),
    dropGrantsBefore: z.number().int().nullable(),
  })
  .strict()

/** A version-1 snapshot (ranges per node) as the same state in version 2; its plan fingerprint from its ranges. */
export function fromVersion1(snapshot: ControllerSnapshot): DurableState {
  const byId = [...snapshot.nodes].sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0))
  const nodes: PersistedNode[] = byId.map(({ rangeStart: _s, rangeCount: _c, ...node }) => node)
  return {
    version: 2,
    meta: {
      generation: snapshot.generation,
      totalShards: snapshot.totalShards,
      maxConcurrency: snapshot.maxConcurrency ?? null,
      planFingerprint: planFingerprint(byId.map((n) => [n.nodeId, n] as const)),
      reshard: snapshot.reshard === undefined ? null : { ...snapshot.reshard, waitingFor: [...snapshot.reshard.waitingFor] },
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
  if (v1.success) return { success: true, data: fromVersion1(v1.data as ControllerSnapshot) }
  return { success: false, error: (value as { version?: unknown })?.version === 1 ? v1.error : v2.error }
}

// Compile-time guards: the schemas and the types must not drift apart.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
const stateMatches: Same<keyof z.infer<typeof durableStateSchema>, keyof DurableState> = true
const deltaMatches: Same<keyof z.infer<typeof stateDeltaSchema>, keyof StateDelta> = true
const nodeMatches: Same<keyof z.infer<typeof persistedNodeSchema>, keyof PersistedNode> = true
void stateMatches
void deltaMatches
void nodeMatches
