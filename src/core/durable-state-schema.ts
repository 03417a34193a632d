/**
 * zod schemas of what a state store reads back (DurableState, StateDelta). Stores validate what they READ;
 * what the controller itself produces is typed, and compile-time guards keep both in step.
 */
import { z } from 'zod'
import { nameSchema } from './names.js'
import type { DurableState, HandoffRun, PersistedNode, ShardRun, StateDelta } from './durable-state.js'

const nonNegativeInt = z.number().int().min(0)
const count = nonNegativeInt.max(128)

/** A node record as persisted. */
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
    range: z.tuple([nonNegativeInt.max(65536), count]).optional(),
  })
  .strict()

/** A pending handoff. */
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
    planner: z.literal('stable').optional(),
    liveReshard: z
      .object({
        fromTotalShards: z.number().int().min(1).max(65536),
        toTotalShards: z.number().int().min(1).max(65536),
        startedAt: z.number().int().min(1),
        changedAt: z.number().int().min(1),
        handoffs: z.array(z.tuple([nonNegativeInt.max(65535), z.number().int().min(1).max(65536), nameSchema, z.number().int().min(1)]).refine((run) => run[0] + run[1] <= 65536, 'a run must end at shard 65535 or before')),
        ranges: z.array(z.tuple([nameSchema, nonNegativeInt.max(65535), count])).optional(),
      })
      .strict()
      .optional(),
    configuredTotalShards: z.number().int().min(1).max(65536).optional(),
    retired: z
      .object({ totalShards: z.number().int().min(1).max(65536), generation: z.number().int().min(1), waitingFor: z.array(nameSchema) })
      .strict()
      .optional(),
    revoked: z.array(z.tuple([nameSchema, z.string().regex(/^[0-9a-f]{1,128}$/, 'must be lower-case hex'), z.number().int().min(0)])).optional(),
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

const shardId = nonNegativeInt.max(65535)
const runCount = z.number().int().min(1).max(65536)
const withinShards = (run: readonly [number, number, ...unknown[]]) => run[0] + run[1] <= 65536
const runBeyondShards = 'a run must end at shard 65535 or before'

/** A run of handoffs; a single object per shard is what journals written before runs hold. */
const handoffRunSchema = z.union([
  z.tuple([shardId, runCount, nameSchema, z.number().int().min(1)]).refine(withinShards, runBeyondShards),
  handoffSchema.transform((h): HandoffRun => [h.shardId, 1, h.fromNode, h.generation]),
])

/** A run of released shards; a bare shard ID is what journals written before runs hold. */
const shardRunSchema = z.union([
  z.tuple([shardId, runCount]).refine(withinShards, runBeyondShards),
  shardId.transform((id): ShardRun => [id, 1]),
])

/** One journalled change. */
export const stateDeltaSchema = z
  .object({
    meta: stateMetaSchema,
    putNodes: z.array(persistedNodeSchema),
    deleteNodes: z.array(nameSchema),
    putDraining: z.array(nameSchema),
    deleteDraining: z.array(nameSchema),
    putHandoffs: z.array(handoffRunSchema),
    deleteHandoffs: z.array(shardRunSchema),
    addGrants: z.array(z.number().int()),
    dropGrantsBefore: z.number().int().nullable(),
  })
  .strict()

// Compile-time guards: the schemas and the types must not drift apart.
/** True when A and B are the same type (compile-time guards that a schema and its type did not drift). */
export type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
const stateMatches: Same<keyof z.infer<typeof durableStateSchema>, keyof DurableState> = true
const deltaMatches: Same<keyof z.infer<typeof stateDeltaSchema>, keyof StateDelta> = true
const nodeMatches: Same<keyof z.infer<typeof persistedNodeSchema>, keyof PersistedNode> = true
void stateMatches
void deltaMatches
void nodeMatches
