/** The flags of `npm run fleet`, validated with zod; every derived default is computed here. */
import { parseArgs } from 'node:util'
import { z } from 'zod'
import { defaultStopTimeoutMs } from '../../src/agent/agent-options.js'

/** Everything a fleet run is made of (see README.md for what each flag does). */
export interface FleetOptions {
  readonly nodes: number
  readonly shards: number
  readonly maxConcurrency: number
  readonly durationS: number
  readonly seed: number
  readonly leaseS: number
  readonly identifyIntervalMs: number
  /** Every node's capacity, or null for a seeded mix of ceil(shards / nodes) and one more. */
  readonly capacity: number | null
  readonly dailyLimit: number
  readonly churn: ChurnCounts
  readonly perProcess: number
  readonly settleTimeoutS: number
  readonly wakeGraceMs: number
  /** total_shards a reshard restart switches to (the next one switches back, and so on). */
  readonly reshardTo: number
  /** A live reshard after the churn has settled (POST /v1/reshard to this count), or null. */
  readonly liveReshardTo: number | null
  /** How long the partitioned node's stop callbacks take (unless its agent aborts them sooner). */
  readonly slowStopMs: number
  /** Two controller replicas on a real etcd (HA) instead of one controller with a state folder. */
  readonly ha: boolean
  /** What the agents' shard callbacks run: recording only (`none`), or the discord.js adapter against the gateway emulator. */
  readonly gateway: GatewayMode
  /** Numbered test events each emulated session produces per second (with `gateway: 'discordjs'`). */
  readonly gatewayEventsPerSecond: number
  readonly json: string | null
  readonly keep: boolean
  readonly progress: boolean
}

/** `--gateway`: the shard callbacks record only, or run DiscordjsShards against the gateway emulator. */
export type GatewayMode = 'none' | 'discordjs'

/** With the discord.js adapter the controller spaces grants at least this far apart (connect time before IDENTIFY). */
export const DISCORDJS_MIN_INTERVAL_MS = 5500

/** How many events of each kind the churn schedule holds. */
export interface ChurnCounts {
  readonly joins: number
  readonly leaves: number
  readonly drains: number
  readonly pauses: number
  readonly restarts: number
  readonly revocations: number
  readonly reshards: number
  readonly partitions: number
  /** kill -9 of the leading replica (--ha only). */
  readonly takeovers: number
}

/** A bad flag; the CLI prints it and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}

export const HELP = `Usage: npm run fleet -- --nodes N --shards S [options]

Runs N real node agents (src/agent) against a real controller child process with seeded churn, records
every shard start and stop on one monotonic timeline, and exits 1 on any violation.

  --nodes N                agents, each with its own P-256 certificate (50)
  --shards S               total shards (64)
  --max-concurrency M      Identify buckets; S must be a multiple (16)
  --duration s             length of the churn phase (30)
  --seed n                 churn schedule seed (random; printed)
  --lease s                controller lease_seconds (8)
  --identify-interval-ms   controller identify_interval_ms, >= 5000 (5100; with --gateway discordjs
                           >= 5500, default 5500: slack for connect time between a grant and its IDENTIFY)
  --capacity c             every node's capacity (a seeded mix of ceil(S / N) and one more)
  --daily-limit n          controller daily_identify_limit (10 x S)
  --joins --leaves --drains --pauses --restarts --revocations --reshards --partitions n
                           churn events of each kind (N/20, N/20, 2, 1, 1, 1, 0, 1)
  --reshard-to S2          total_shards of a reshard restart, a multiple of M; the next one goes back
                           to S (2 x S)
  --live-reshard S2        after the churn has settled, a live reshard to S2 (POST /v1/reshard): the
                           next set identifies beside the current one, then the switch; the summary
                           gives the time to the switch, the grants spent and the guild-coverage check
                           (capacities are made for S2 too)
  --slow-stop-ms ms        stop callbacks of a partitioned node take this long, or end when the agent
                           aborts them (3/4 of the agent's default stop timeout, lease/6 at most 30 s)
  --ha                     two controller replicas on a real 1-member etcd (mutual TLS) instead of one
                           controller with a state folder; needs the etcd binary (ETCD_BIN, or PATH)
  --takeovers n            kill -9 of the leading replica, started again as a follower (0; --ha only)
  --gateway none|discordjs none: the shard callbacks only record (default); discordjs: every agent runs
                           its shards with the discord.js adapter (src/discordjs) against the gateway
                           emulator (test/support/gateway) in this process, and the summary adds its
                           IDENTIFYs and RESUMEs per phase, breaches and exactly-once delivery
  --gateway-events-per-second n
                           test events per emulated session per second (2; --gateway discordjs)
  --per-process n          agents per worker process (250); each paused or partitioned agent has its own
  --settle-timeout s       how long the fleet may take to converge after the churn (derived)
  --wake-grace-ms ms       time a woken agent has to stop shards it lost while frozen (500)
  --json FILE              also write the summary as JSON
  --keep                   keep the run folder (PKI, state, logs, every record in records.jsonl)
  --no-progress            no progress line on stderr
  -h, --help               this text`

const count = (max: number) => z.coerce.number().int().min(0).max(max)

const flagsSchema = z
  .object({
    nodes: z.coerce.number().int().min(2).max(20_000).default(50),
    shards: z.coerce.number().int().min(1).max(65_536).default(64),
    'max-concurrency': z.coerce.number().int().min(1).max(65_536).default(16),
    duration: z.coerce.number().min(1).max(86_400).default(30),
    seed: z.coerce.number().int().min(0).max(0xffffffff).optional(),
    lease: z.coerce.number().int().min(3).max(3600).default(8),
    'identify-interval-ms': z.coerce.number().int().min(5000).max(60_000).optional(),
    capacity: z.coerce.number().int().min(1).max(128).optional(),
    'daily-limit': z.coerce.number().int().min(1).max(1_000_000).optional(),
    joins: count(10_000).optional(),
    leaves: count(10_000).optional(),
    drains: count(1000).default(2),
    pauses: count(20).default(1),
    restarts: count(100).default(1),
    revocations: count(1000).default(1),
    reshards: count(100).default(0),
    partitions: count(20).default(1),
    takeovers: count(100).default(0),
    'reshard-to': z.coerce.number().int().min(1).max(65_536).optional(),
    'live-reshard': z.coerce.number().int().min(1).max(65_536).optional(),
    'slow-stop-ms': z.coerce.number().int().min(0).max(600_000).optional(),
    'per-process': z.coerce.number().int().min(1).max(5000).default(250),
    'settle-timeout': z.coerce.number().min(1).max(86_400).optional(),
    'wake-grace-ms': z.coerce.number().int().min(0).max(60_000).default(500),
    json: z.string().min(1).optional(),
    keep: z.boolean().default(false),
    ha: z.boolean().default(false),
    gateway: z.enum(['none', 'discordjs']).default('none'),
    'gateway-events-per-second': z.coerce.number().min(0).max(100).optional(),
    'no-progress': z.boolean().default(false),
  })
  .strict()

const STRING_FLAGS = ['nodes', 'shards', 'max-concurrency', 'duration', 'seed', 'lease', 'identify-interval-ms', 'capacity', 'daily-limit', 'joins', 'leaves', 'drains', 'pauses', 'restarts', 'revocations', 'reshards', 'partitions', 'takeovers', 'reshard-to', 'live-reshard', 'slow-stop-ms', 'per-process', 'settle-timeout', 'wake-grace-ms', 'json', 'gateway', 'gateway-events-per-second'] as const

/** Parses argv (without node and script); null means --help was asked for. Throws UsageError. */
export function parseFleetArgs(argv: readonly string[]): FleetOptions | null {
  let values: Record<string, string | boolean | undefined>
  try {
    const options = Object.fromEntries(STRING_FLAGS.map((name) => [name, { type: 'string' as const }]))
    values = parseArgs({
      args: [...argv],
      options: { ...options, keep: { type: 'boolean' }, ha: { type: 'boolean' }, 'no-progress': { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: false,
    }).values
  } catch (err) {
    throw new UsageError((err as Error).message)
  }
  if (values.help) return null
  delete values.help
  const parsed = flagsSchema.safeParse(values)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    throw new UsageError(`--${issue.path.join('.')}: ${issue.message}`)
  }
  return resolveOptions(parsed.data)
}

function resolveOptions(f: z.infer<typeof flagsSchema>): FleetOptions {
  const nodes = f.nodes
  if (f['max-concurrency'] > 1 && f.shards % f['max-concurrency'] !== 0) {
    throw new UsageError(`--shards (${f.shards}) must be a multiple of --max-concurrency (${f['max-concurrency']}), as Discord requires`)
  }
  const churn: ChurnCounts = {
    joins: f.joins ?? Math.max(1, Math.round(nodes / 20)),
    leaves: f.leaves ?? Math.max(1, Math.round(nodes / 20)),
    drains: f.drains,
    pauses: f.pauses,
    restarts: f.restarts,
    revocations: f.revocations,
    reshards: f.reshards,
    partitions: f.partitions,
    takeovers: f.takeovers,
  }
  // A take-over needs a second replica to take over.
  if (churn.takeovers > 0 && !f.ha) throw new UsageError('--takeovers needs --ha (a single controller has no replica to take over)')
  // Joins start late, and leaves, revocations, pauses and partitions each need a node of their own; two stay steady.
  const reserved = churn.joins + churn.leaves + churn.revocations + churn.pauses + churn.partitions
  if (reserved > nodes - 2) throw new UsageError(`joins + leaves + revocations + pauses + partitions (${reserved}) must leave at least 2 of the ${nodes} nodes untouched`)
  const mc = f['max-concurrency']
  const gateway = f.gateway
  const interval = f['identify-interval-ms'] ?? (gateway === 'discordjs' ? DISCORDJS_MIN_INTERVAL_MS : 5100)
  if (gateway === 'discordjs' && interval < DISCORDJS_MIN_INTERVAL_MS) {
    throw new UsageError(`--identify-interval-ms (${interval}) must be >= ${DISCORDJS_MIN_INTERVAL_MS} with --gateway discordjs (slack for the connect time between a grant and its IDENTIFY)`)
  }
  if (gateway === 'none' && f['gateway-events-per-second'] !== undefined) throw new UsageError('--gateway-events-per-second needs --gateway discordjs')
  // Doubling, as a growing bot does (the capacities are made for the larger count); halving at the limit.
  const reshardTo = f['reshard-to'] ?? (2 * f.shards <= 65_536 ? 2 * f.shards : f.shards / 2)
  if (reshardTo === f.shards) throw new UsageError(`--reshard-to (${reshardTo}) must differ from --shards`)
  if (mc > 1 && reshardTo % mc !== 0) throw new UsageError(`--reshard-to (${reshardTo}) must be a multiple of --max-concurrency (${mc}), as Discord requires`)
  const liveReshardTo = f['live-reshard'] ?? null
  if (liveReshardTo !== null && liveReshardTo === f.shards) throw new UsageError(`--live-reshard (${liveReshardTo}) must differ from --shards`)
  if (liveReshardTo !== null && mc > 1 && liveReshardTo % mc !== 0) throw new UsageError(`--live-reshard (${liveReshardTo}) must be a multiple of --max-concurrency (${mc}), as Discord requires`)
  // 3/4 of the agent's default stop timeout: slow, yet within it (--slow-stop-ms above it makes the agent abort).
  const slowStopMs = f['slow-stop-ms'] ?? Math.round(0.75 * defaultStopTimeoutMs(f.lease * 1000))
  // A cold start needs one Identify interval per shard of a bucket; then leases for the stragglers.
  const perBucket = Math.ceil(Math.max(f.reshards > 0 ? Math.max(f.shards, reshardTo) : f.shards, liveReshardTo ?? 0) / mc)
  const settle = f['settle-timeout'] ?? Math.max(60, Math.ceil((perBucket * interval * 1.5) / 1000 + 2 * f.lease))
  return {
    nodes,
    shards: f.shards,
    maxConcurrency: f['max-concurrency'],
    durationS: f.duration,
    seed: f.seed ?? Math.floor(Math.random() * 0xffffffff),
    leaseS: f.lease,
    identifyIntervalMs: interval,
    capacity: f.capacity ?? null,
    dailyLimit: f['daily-limit'] ?? Math.min(1_000_000, 10 * f.shards),
    churn,
    perProcess: f['per-process'],
    settleTimeoutS: settle,
    wakeGraceMs: f['wake-grace-ms'],
    reshardTo,
    liveReshardTo,
    slowStopMs,
    ha: f.ha,
    gateway,
    gatewayEventsPerSecond: f['gateway-events-per-second'] ?? 2,
    json: f.json ?? null,
    keep: f.keep,
    progress: !f['no-progress'],
  }
}
