/** The flags of `npm run bench:fleet`, validated with zod. */
import { parseArgs } from 'node:util'
import { z } from 'zod'

/** A bad flag (the CLI exits 2). */
export class BenchUsageError extends Error {
  override readonly name = 'BenchUsageError'
}

export const BENCH_HELP = `Usage: npm run bench:fleet -- [options]

The fleet benchmark: light nodes (the agent's cadence and wire format; shards only in phase d) against a real
controller child process. Measures (a) the cold join, (c) the steady state, (b) a kill -9 and restart,
and (d) a drain: an operator drains --drain nodes; nodes that lose shards stop them and deposit their
sessions, nodes that gain shards claim them (counted: resumes against Identify grants).

  --nodes N            nodes (10000), capacity --capacity each (8)
  --shards S           total shards (65536); --max-concurrency M (16); --lease s (30)
  --planner P          the controller's planner: contiguous (the default) or stable
  --drain n            nodes drained in phase (d) (default 1 % of --nodes, at least 1; 0: no phase d)
  --workers n          load-generator processes (1)
  --nodes-per-address n  nodes sharing one loopback source address (1: a machine each, as PXE-booted nodes
                       have; up to 64, the controller's default cap per address: nodes behind one NAT)
  --generator-nice n   their scheduling priority, 0..19 (default 10: they stand in for machines with CPUs of
                       their own, so they take only the CPU the controller leaves; 0: the same as the controller)
  --join-spread s      nodes start within this many seconds (0: all at once, a fleet powered on)
  --steady s           length of each steady-state window (30)
  --pki DIR            keep the PKI and bundles in DIR and reuse them next time (issuing 10,000 takes minutes)
  --repeat n           run every phase n times, each with a fresh controller (1..9, default 1); prints each run,
                       then the medians
  --no-ceiling         skip measuring the ceiling (raw node:https, P-256) before each run; by default each run
                       first measures what a full and a resumed connection cost at the least this machine can
                       do now, and prints beside each phase the CPU the phase would need at that cost
  --cpu-prof DIR       profile the restarted controller (node --cpu-prof): restart, steady window, drain
  --cpu-prof-join DIR  profile the first controller (node --cpu-prof): the cold join and the steady window
                       after it. V8 writes a profile only at a clean exit, so phase (b) then stops that
                       controller with SIGTERM instead of kill -9: that run's restart is not a crash's
                       (said beside its figures). Not with --ha.
  --controller-node-args=ARGS  node flags for every controller process (any: this is a developer's
                       tool), space-separated, each --name or --name=value, no positional arguments (note
                       the "=": the value starts with a dash), to compare V8 settings side by side:
                       --controller-node-args="--trace-gc --max-semi-space-size=32"
  --generator-prof DIR each load generator writes a CPU profile of its whole run into DIR (node --cpu-prof)
  --ha                 the control plane is two replicas on etcd: a local 3-member etcd with client and peer
                       mutual TLS and --max-txn-ops 4096 is started for the run (as deploy/ha-local.sh does;
                       needs the etcd binary: Debian's etcd-server, or ETCD_BIN), and phase (b) is a
                       take-over: kill -9 of the leader, the other replica takes over, the killed one
                       starts again as a follower; the
                       drain also counts etcd's writes. Prints "take-over: every node renewed X.X s after
                       the kill; shards moved N; full handshakes F, resumed R"
  --ha-etcd FILE       with --ha: use this etcd instead of starting one. FILE holds the "etcd" object of a
                       controller's "ha" section: {"endpoints": ["https://host:port", ...], "ca": PEM path,
                       "cert": PEM path, "key": PEM path, "server_name": optional DNS name, "max_txn_ops":
                       optional, its members' --max-txn-ops, default 128}, paths relative to FILE. Each
                       run writes under /pxe-fleet-bench-<pid>-<run>/ and removes it afterwards
  --ha-ttl s           the replicas' etcd lease TTL (lease_ttl_seconds; default 5, 2..300): a take-over
                       starts about one TTL after the kill
  --json FILE          also write the figures as JSON
  -h, --help           this text`

const schema = z
  .object({
    nodes: z.coerce.number().int().min(1).max(60_000).default(10_000),
    shards: z.coerce.number().int().min(1).max(65_536).default(65_536),
    capacity: z.coerce.number().int().min(1).max(128).default(8),
    'max-concurrency': z.coerce.number().int().min(1).max(65_536).default(16),
    lease: z.coerce.number().int().min(3).max(3600).default(30),
    planner: z.enum(['contiguous', 'stable']).default('contiguous'),
    drain: z.coerce.number().int().min(0).optional(),
    workers: z.coerce.number().int().min(1).max(16).default(1),
    'nodes-per-address': z.coerce.number().int().min(1).max(64).default(1),
    'generator-nice': z.coerce.number().int().min(0).max(19).default(10),
    'join-spread': z.coerce.number().min(0).max(3600).default(0),
    steady: z.coerce.number().min(1).max(3600).default(30),
    repeat: z.coerce.number().int().min(1).max(9).default(1),
    'no-ceiling': z.boolean().default(false),
    pki: z.string().min(1).optional(),
    'cpu-prof': z.string().min(1).optional(),
    'cpu-prof-join': z.string().min(1).optional(),
    'controller-node-args': z
      .string()
      .transform((v) => v.split(/\s+/).filter((a) => a !== ''))
      .refine((args) => args.every((a) => /^--[a-z0-9][a-z0-9_-]*(=[^\s]*)?$/i.test(a)), 'each argument must be a node or V8 flag (--name or --name=value), no positional arguments')
      .default([]),
    'generator-prof': z.string().min(1).optional(),
    json: z.string().min(1).optional(),
    ha: z.boolean().default(false),
    'ha-etcd': z.string().min(1).optional(),
    'ha-ttl': z.coerce.number().int().min(2).max(300).default(5),
  })
  .strict()

/** The validated flags (`drain` resolved to a count). */
export type BenchOptions = Omit<z.infer<typeof schema>, 'drain'> & { readonly drain: number }

const STRINGS = ['nodes', 'shards', 'capacity', 'max-concurrency', 'lease', 'planner', 'drain', 'workers', 'nodes-per-address', 'generator-nice', 'join-spread', 'steady', 'repeat', 'pki', 'cpu-prof', 'cpu-prof-join', 'controller-node-args', 'generator-prof', 'json', 'ha-etcd', 'ha-ttl'] as const

/** Parses argv; null for --help. */
export function parseBenchArgs(argv: readonly string[]): BenchOptions | null {
  let values: Record<string, string | boolean | undefined>
  try {
    const options = Object.fromEntries(STRINGS.map((name) => [name, { type: 'string' as const }]))
    values = parseArgs({ args: [...argv], options: { ...options, 'no-ceiling': { type: 'boolean' }, ha: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false }).values
  } catch (err) {
    throw new BenchUsageError((err as Error).message)
  }
  if (values.help) return null
  delete values.help
  const parsed = schema.safeParse(values)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    throw new BenchUsageError(`--${issue.path.join('.')}: ${issue.message}`)
  }
  const o = parsed.data
  if (o['max-concurrency'] > 1 && o.shards % o['max-concurrency'] !== 0) throw new BenchUsageError('--shards must be a multiple of --max-concurrency')
  if (o['ha-etcd'] !== undefined && !o.ha) throw new BenchUsageError('--ha-etcd needs --ha')
  if (values['ha-ttl'] !== undefined && !o.ha) throw new BenchUsageError('--ha-ttl needs --ha')
  // a take-over must kill its leader with -9; the profile needs a clean exit
  if (o['cpu-prof-join'] !== undefined && o.ha) throw new BenchUsageError('--cpu-prof-join does not go with --ha (a take-over is a kill -9, and V8 writes a profile only at a clean exit)')
  const drain = o.drain ?? Math.max(1, Math.round(o.nodes / 100))
  if (drain >= o.nodes) throw new BenchUsageError(`--drain must leave at least one node undrained (below --nodes ${o.nodes})`)
  return { ...o, drain }
}
