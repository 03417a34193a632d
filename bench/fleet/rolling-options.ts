/** The flags of `npm run fleet -- --rolling-reboot`, validated with zod, and the fleet options they make. */
import { parseArgs } from 'node:util'
import { z } from 'zod'
import { DISCORDJS_MIN_INTERVAL_MS, UsageError, type FleetOptions } from './options.js'

/** A rolling reboot: the fleet it runs in, and how each node goes down. */
export interface RollingOptions {
  /** The fleet (every node in a process of its own, the discord.js adapter, no churn). */
  readonly fleet: FleetOptions
  /** How the host ends the node's process: SIGTERM (pxe-node leaves) or SIGKILL (the control: a crash). */
  readonly signal: 'SIGTERM' | 'SIGKILL'
  /** How long a node stays down between its process ending and the new one starting (ms). */
  readonly rebootMs: number
  /** The controller's planner (null: its default, contiguous). */
  readonly planner: 'contiguous' | 'stable' | null
}

export const ROLLING_HELP = `Usage: npm run fleet -- --rolling-reboot [--kill] [options]

Rolling reboot (issue 60): N nodes, each in its own process running the discord.js adapter against the
gateway emulator, a real controller child process; once every shard serves, the nodes are rebooted one
after another: the process ends (SIGTERM: its agent leaves, as pxe-node does; --kill: SIGKILL, the
control), the node stays down --reboot-s, a new process of the same node (same certificate, fresh state)
starts, and the next reboot waits until the fleet has converged again with every shard serving. Prints
the moves, IDENTIFYs and RESUMEs, each moved shard's downtime (old owner's stop → new owner's READY or
RESUMED: median, max), exactly-once delivery and the wall time; exits 1 on any violation.

  --kill                   SIGKILL instead of SIGTERM (no stop, no leave: the shards move when the
                           lease runs out, without their sessions)
  --nodes N                nodes (4)
  --shards S               total shards (16)
  --max-concurrency M      Identify buckets; S must be a multiple (4)
  --capacity c             every node's capacity (ceil(S / (N - 1)): one node down still fits every shard)
  --lease s                controller lease_seconds (9; an agent checks in every lease/3)
  --identify-interval-ms   controller identify_interval_ms, >= ${DISCORDJS_MIN_INTERVAL_MS} (${DISCORDJS_MIN_INTERVAL_MS})
  --reboot-s s             how long a node is down between its process ending and the new one
                           starting (lease + 3: longer than a lease, as a machine's reboot is)
  --events-per-second n    test events per gateway session per second (5)
  --planner contiguous|stable
                           the controller's planner (its default, contiguous: a node leaving or coming
                           back shifts the other nodes' ranges too; stable moves only what it must)
  --settle-timeout s       how long each convergence may take (derived)
  --json FILE              also write the summary as JSON
  --keep                   keep the run folder (PKI, state, logs, records.jsonl, gateway.json)
  --no-progress            no milestone lines on stderr
  -h, --help               this text`

const flagsSchema = z
  .object({
    'rolling-reboot': z.literal(true),
    kill: z.boolean().default(false),
    nodes: z.coerce.number().int().min(2).max(64).default(4),
    shards: z.coerce.number().int().min(1).max(1024).default(16),
    'max-concurrency': z.coerce.number().int().min(1).max(1024).default(4),
    capacity: z.coerce.number().int().min(1).max(128).optional(),
    lease: z.coerce.number().int().min(3).max(3600).default(9),
    'identify-interval-ms': z.coerce.number().int().min(DISCORDJS_MIN_INTERVAL_MS).max(60_000).default(DISCORDJS_MIN_INTERVAL_MS),
    'reboot-s': z.coerce.number().min(0).max(3600).optional(),
    'events-per-second': z.coerce.number().min(0).max(50).default(5),
    planner: z.enum(['contiguous', 'stable']).optional(),
    'settle-timeout': z.coerce.number().min(1).max(86_400).optional(),
    json: z.string().min(1).optional(),
    keep: z.boolean().default(false),
    'no-progress': z.boolean().default(false),
  })
  .strict()

const STRING_FLAGS = ['nodes', 'shards', 'max-concurrency', 'capacity', 'lease', 'identify-interval-ms', 'reboot-s', 'events-per-second', 'planner', 'settle-timeout', 'json'] as const
const BOOLEAN_FLAGS = ['rolling-reboot', 'kill', 'keep', 'no-progress'] as const

/** Parses argv (without node and script, --rolling-reboot included); null means --help. Throws UsageError. */
export function parseRollingArgs(argv: readonly string[]): RollingOptions | null {
  let values: Record<string, string | boolean | undefined>
  try {
    const options = {
      ...Object.fromEntries(STRING_FLAGS.map((name) => [name, { type: 'string' as const }])),
      ...Object.fromEntries(BOOLEAN_FLAGS.map((name) => [name, { type: 'boolean' as const }])),
      help: { type: 'boolean' as const, short: 'h' },
    }
    values = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values
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
  const f = parsed.data
  const mc = f['max-concurrency']
  if (mc > 1 && f.shards % mc !== 0) throw new UsageError(`--shards (${f.shards}) must be a multiple of --max-concurrency (${mc}), as Discord requires`)
  // One node down must leave room for every shard, or its shards have nowhere to move.
  const capacity = f.capacity ?? Math.ceil(f.shards / (f.nodes - 1))
  if (capacity * (f.nodes - 1) < f.shards) throw new UsageError(`--capacity ${capacity} × ${f.nodes - 1} nodes (one down) holds fewer than the ${f.shards} shards`)
  // A cold start needs one Identify interval per shard of a bucket; then leases for the moves.
  const settle = f['settle-timeout'] ?? Math.max(60, Math.ceil((Math.ceil(f.shards / mc) * f['identify-interval-ms'] * 1.5) / 1000 + 3 * f.lease))
  const fleet: FleetOptions = {
    nodes: f.nodes,
    shards: f.shards,
    maxConcurrency: mc,
    durationS: 1,
    seed: 1,
    leaseS: f.lease,
    identifyIntervalMs: f['identify-interval-ms'],
    capacity,
    dailyLimit: 10 * f.shards,
    churn: { joins: 0, leaves: 0, drains: 0, pauses: 0, restarts: 0, revocations: 0, reshards: 0, partitions: 0, takeovers: 0 },
    // a process per node: a reboot ends it (SIGTERM or SIGKILL) and starts a new one
    perProcess: 1,
    settleTimeoutS: settle,
    wakeGraceMs: 500,
    reshardTo: 2 * f.shards,
    liveReshardTo: null,
    slowStopMs: 0,
    ha: false,
    gateway: 'discordjs',
    gatewayEventsPerSecond: f['events-per-second'],
    json: f.json ?? null,
    keep: f.keep,
    progress: !f['no-progress'],
  }
  return { fleet, signal: f.kill ? 'SIGKILL' : 'SIGTERM', rebootMs: Math.round((f['reboot-s'] ?? f.lease + 3) * 1000), planner: f.planner ?? null }
}
