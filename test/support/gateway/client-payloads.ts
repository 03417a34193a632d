/**
 * The shapes of IDENTIFY and RESUME `d` (developers/events/gateway-events.mdx, "Identify Structure",
 * "Resume Structure"). A `d` that does not fit is "an invalid payload for an opcode" (4001). `intents`
 * and `shard` are only required to be present here: their values have close codes of their own
 * (4013/4014, 4010), judged by the emulator.
 */
import { z } from 'zod'

const identifyData = z.object({
  token: z.string(),
  properties: z.object({ os: z.string(), browser: z.string(), device: z.string() }),
  intents: z.unknown().refine((v) => v !== undefined, 'intents is required'),
  shard: z.unknown().optional(),
  compress: z.boolean().optional(),
  large_threshold: z.number().int().min(50).max(250).optional(),
  presence: z.unknown().optional(),
})

const resumeData = z.object({
  token: z.string(),
  session_id: z.string(),
  // @discordjs/ws sends the last sequence it saw; null (nothing seen yet) replays everything.
  seq: z.number().int().min(0).nullable(),
})

export type IdentifyData = z.infer<typeof identifyData>
export type ResumeData = z.infer<typeof resumeData>

/** The IDENTIFY data, or why it does not fit. */
export function parseIdentify(d: unknown): { ok: true; data: IdentifyData } | { ok: false; problem: string } {
  const r = identifyData.safeParse(d)
  return r.success ? { ok: true, data: r.data } : { ok: false, problem: firstIssue(r.error) }
}

/** The RESUME data, or why it does not fit. */
export function parseResume(d: unknown): { ok: true; data: ResumeData } | { ok: false; problem: string } {
  const r = resumeData.safeParse(d)
  return r.success ? { ok: true, data: r.data } : { ok: false, problem: firstIssue(r.error) }
}

/** `shard` as [shard_id, num_shards], or null when it is not a pair of integers. Absent means [0, 1]. */
export function shardPair(shard: unknown): [number, number] | null {
  if (shard === undefined) return [0, 1]
  if (!Array.isArray(shard) || shard.length !== 2) return null
  const [id, count] = shard as unknown[]
  return Number.isInteger(id) && Number.isInteger(count) ? [id as number, count as number] : null
}

function firstIssue(error: z.ZodError): string {
  const issue = error.issues[0]
  return issue ? `${issue.path.join('.') || 'd'}: ${issue.message}` : 'invalid'
}
