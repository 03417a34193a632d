/** zod schema of ControllerSnapshot, so the state store can parse what it reads back from disk. */
import { z } from 'zod'
import { nameSchema } from './names.js'
import type { ControllerSnapshot } from './types.js'

const nonNegativeInt = z.number().int().min(0)
const count = nonNegativeInt.max(128)

const snapshotNodeSchema = z
  .object({
    nodeId: nameSchema,
    capacity: z.number().int().min(1).max(128),
    rangeStart: nonNegativeInt.max(65536),
    rangeCount: count,
    reportedGeneration: nonNegativeInt.nullable(),
    certSerial: z.string().regex(/^[0-9a-f]{1,128}$/, 'must be lower-case hex'),
    certNotBefore: z.number().int(),
    readyShards: count,
    startingShards: count,
    backoffShards: count,
    fatalShards: count,
  })
  .strict()

const handoffSchema = z
  .object({ shardId: nonNegativeInt.max(65535), fromNode: nameSchema, generation: z.number().int().min(1) })
  .strict()

/** The persisted controller state (version 1), strict at every level. */
export const controllerSnapshotSchema = z
  .object({
    version: z.literal(1),
    generation: nonNegativeInt,
    totalShards: z.number().int().min(1).max(65536),
    nodes: z.array(snapshotNodeSchema),
    draining: z.array(nameSchema),
    handoffs: z.array(handoffSchema),
    dailyGrants: z.array(z.number().int()),
    // RFC 5280 caps CRL numbers at 20 octets (49 decimal digits); optional so older state files load.
    crlNumber: z.string().regex(/^(0|[1-9][0-9]{0,48})$/, 'must be a decimal CRL number').optional(),
  })
  .strict()

// Compile-time guards: the schema and the ControllerSnapshot type must not drift apart.
type Parsed = z.infer<typeof controllerSnapshotSchema>
type SameKeys<A, B> = [keyof A] extends [keyof B] ? ([keyof B] extends [keyof A] ? true : false) : false
const parsedIsSnapshot = (value: Parsed): ControllerSnapshot => value
const topKeysMatch: SameKeys<Parsed, ControllerSnapshot> = true
const nodeKeysMatch: SameKeys<Parsed['nodes'][number], ControllerSnapshot['nodes'][number]> = true
const handoffKeysMatch: SameKeys<Parsed['handoffs'][number], ControllerSnapshot['handoffs'][number]> = true
void parsedIsSnapshot
void topKeysMatch
void nodeKeysMatch
void handoffKeysMatch
