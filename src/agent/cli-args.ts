/** The pxe-node command line: flags, their checks, and the help text. */
import { ArgvError, parseArgv, repeatedFlag, type FlagDef } from '../cli-kit/argv.js'
import { isLoopbackHost } from '../net/host.js'
import { nameProblem } from '../core/names.js'
import { controllerUrlProblem } from './agent-options.js'
import { parseListenAddress, upstreamProblem, type ListenAddress } from '../rest/listen-address.js'

/** A bad command line; the message says what to fix. */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}

/** A validated command line. */
export interface CliArgs {
  readonly help: boolean
  /** --version: print "pxe-node <version>" and exit. */
  readonly version: boolean
  /** The bundle folder, or '' when the node enrolls. */
  readonly bundle: string
  /** --enroll and its companions, or null (a bundle). */
  readonly enroll: EnrollArgs | null
  readonly controllers: string[]
  readonly capacity: number
  readonly stateFile: string | null
  readonly logLevel: string
  readonly onStart: string | null
  readonly onStop: string | null
  readonly clockSkewMs: number
  /** null: the agent's default (a sixth of the lease, at most 30 s). */
  readonly stopTimeoutMs: number | null
  /** Where GET /metrics is served (port 0: a free one), or null: not served. */
  readonly metrics: { readonly host: string; readonly port: number } | null
  /** --rest-proxy (and --rest-upstream), or null: no REST proxy. */
  readonly restProxy: { readonly listen: ListenAddress; readonly upstream: string | null } | null
}

/** How a node without a bundle gets its identity. */
export interface EnrollArgs {
  readonly urls: string[]
  readonly token: { readonly file: string } | { readonly env: string }
  readonly name: string
  readonly caFile: string
  /** Where key and certificate are kept across restarts, or null: nothing touches the disk. */
  readonly stateDir: string | null
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']
const DEFAULT_CAPACITY = 16
const DEFAULT_CLOCK_SKEW_MS = 5000
const MAX_CLOCK_SKEW_MS = 60_000
const MIN_STOP_TIMEOUT_MS = 100
const MAX_STOP_TIMEOUT_MS = 600_000
const DEFAULT_METRICS_HOST = '127.0.0.1'

const OPTIONS = {
  bundle: { type: 'string' },
  enroll: { type: 'string' },
  'token-file': { type: 'string' },
  'token-env': { type: 'string' },
  name: { type: 'string' },
  'ca-file': { type: 'string' },
  'state-dir': { type: 'string' },
  controller: { type: 'string' },
  capacity: { type: 'string' },
  'state-file': { type: 'string' },
  'log-level': { type: 'string' },
  'on-start': { type: 'string' },
  'on-stop': { type: 'string' },
  'clock-skew-ms': { type: 'string' },
  'stop-timeout-ms': { type: 'string' },
  'metrics-port': { type: 'string' },
  'metrics-host': { type: 'string' },
  'metrics-allow-remote': { type: 'boolean' },
  'rest-proxy': { type: 'string' },
  'rest-upstream': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'V' },
} as const satisfies Record<string, FlagDef>

/** The parsed values of OPTIONS: a string for a flag that takes one, true for a switch given. */
type OptionValues = { readonly [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]['type'] extends 'string' ? string : boolean }

/** The text of --help. */
export const HELP = `Usage: pxe-node --bundle DIR --controller URL[,URL...] [options]
       pxe-node --enroll URL[,URL...] (--token-file FILE | --token-env VAR) --name NAME --ca-file CA.pem
                [--state-dir DIR] --controller URL[,URL...] [options]

Runs the node side of the Discord-PXE protocol: checks in with the controller over mutual TLS every
lease/3, verifies every signed plan against the keys pinned in the bundle, claims an Identify slot
before starting each shard, releases shards it loses at once, and stops every shard before its
authority ends when the controller cannot be reached.

Required:
  --bundle DIR           bundle folder made by "pxe-pki issue NAME --role node": key.pem (mode 0600),
                         cert.pem, ca.pem, plan-jwks.json. The node ID is the certificate's CN.
  --controller URLS      controller base URL(s), comma-separated, e.g. https://10.0.0.5:8443; tried in
                         order, failing over to the next on a connection error, a 503 or a refused
                         certificate.

Enrollment (instead of --bundle; a diskless node gets its identity at boot):
  --enroll URLS          the controllers' enrollment listener(s), e.g. https://10.0.0.5:8444, tried in
                         order (the next on a connection error or a 503). The node makes a P-256 key in
                         memory, sends a CSR for --name with the token's proof, and polls until the
                         signer on the CA host answers ("waiting for the signer" lines at info); then it
                         runs as with a bundle. A request past its time is made again with a new key; a
                         listener that cannot be reached is retried with backoff (logged at warn).
  --token-file FILE      the bootstrap token (pxe1.<id>.<secret>, from "pxe-pki token create"), read once
  --token-env VAR        or the environment variable that holds it (one of the two)
  --name NAME            the node's name: the certificate's CN, within the token's name pattern
  --ca-file CA.pem       the controller CA: the only certificate trusted for the enrollment listener, and
                         the CA the issued certificate must come with
  --state-dir DIR        keep key (0600), certificate, CA and plan keys in DIR (bundle layout, written
                         atomically) and use them again at the next start while they are valid, instead
                         of enrolling. Without it nothing touches the disk: each boot enrolls anew.
  Every certificate, from a bundle or enrolled, is renewed by the node itself at two thirds of its
  lifetime (±5 %): a new key in memory, POST /v1/renew, and the new certificate used for new connections
  without stopping a shard (kept in --state-dir when given). A failed renewal is retried with backoff,
  logged at warn and counted (pxe_node_cert_renewal_failures_total); at expiry the controller refuses the
  certificate and the shards stop as for a lost lease. The token's secret and the keys are never logged.

Options:
  --capacity N           shards this node can run, 1..128 (default ${DEFAULT_CAPACITY})
  --state-file FILE      keeps the last accepted plan generation across restarts, so that an older plan
                         replayed after a restart is still refused (written atomically, mode 0600).
                         Without it the rollback floor is kept in memory only.
  --on-start CMD         shell command run to start a shard, once its Identify claim is granted
  --on-stop CMD          shell command run to stop a shard; it must exit only once the shard stopped
  --stop-timeout-ms N    the longest a stop command may run, ${MIN_STOP_TIMEOUT_MS}..${MAX_STOP_TIMEOUT_MS} (default: a sixth of the
                         controller's lease, at most 30000). When the controller cannot be reached, every
                         shard is stopped this long plus a margin (lease/6, at most 5 s) before the node's
                         authority ends, so that each stop has ENDED before another node may start the
                         shard. A stop still running then is killed with its process group and the shard
                         is reported as possibly still running. The stop timeout plus the margin must fit
                         in half the controller's lease; otherwise the agent stops at its first plan,
                         starting nothing (exit status 4).
  --clock-skew-ms N      how long past its expiry a plan is still accepted, 0..${MAX_CLOCK_SKEW_MS} (default ${DEFAULT_CLOCK_SKEW_MS})
  --log-level L          ${LOG_LEVELS.join(', ')} (default info)
  --metrics-port P       serve the agent's metrics (docs/monitoring.md) as plain HTTP on port P,
                         0..65535 (0: a free port; the log line "metrics listener started" names it):
                         GET /metrics answers Prometheus text with the pxe_node_* metrics and the process
                         metrics (process_*, nodejs_*); every other path answers 404. A port that cannot be
                         listened on (in use) stops the agent before its first check-in (exit status 1).
  --metrics-host H       the address to listen on (default ${DEFAULT_METRICS_HOST}, loopback only). The listener has no
                         TLS and no authentication, so a host that is not loopback (127.0.0.0/8, ::1,
                         localhost) is refused unless --metrics-allow-remote is given too.
  --metrics-allow-remote allow a non-loopback --metrics-host (e.g. 0.0.0.0 for a Prometheus elsewhere):
                         anyone who reaches the port can read the metrics
  --rest-proxy HOST:PORT run the REST proxy (docs/rest-budget.md) on HOST:PORT (port 0: a free one; the log
                         line "REST proxy listening" names its URL). Point the bot's REST client at it:
                         new REST({ api: 'http://HOST:PORT/api' }). It forwards each request to Discord with
                         the bot's own Authorization header (never logged), keeps Discord's per-route
                         buckets, and sends no more than this node's share of the bot's REST budget (the
                         controller's "rest"); without a share (no lease, a controller without "rest")
                         it sends nothing and answers held requests 503 after 10 s. Loopback is the
                         default to use; another host is allowed but logged as a warning (anyone who
                         reaches it spends the bot's budget). Needs the optional @discordjs/rest ~2.6.3.
  --rest-upstream URL    Discord's API base for the proxy (default https://discord.com/api; plain http
                         only on loopback), e.g. a test gateway emulator
  -h, --help             print this help
  -V, --version          print "pxe-node <version>" and exit

Shard commands run as /bin/sh -c CMD. The shard is passed in the environment, never in the command text:
  PXE_EVENT (start or stop), PXE_SHARD_ID, PXE_TOTAL_SHARDS, PXE_SHARD_SET, PXE_MAX_CONCURRENCY,
  PXE_NODE_ID, PXE_GENERATION, for starts PXE_START_MODE (below), and for stops PXE_STOP_REASON (plan, leave,
  reshard, lease_expiring, certificate_refused, shutdown). "reshard": the session belongs to another
  shard count or PXE_MAX_CONCURRENCY than the plan's (a reshard, an abort), so it ends without being
  handed on; the plan's shards are claimed and started with the new values.
Live resharding: while the controller reshards, the plan also holds a next set. Its shards start with
  PXE_SHARD_SET=next and the next set's PXE_TOTAL_SHARDS, beside the current set's shards (the same
  PXE_SHARD_ID may run twice, under two shard counts: name units by both). A next-set process should
  IDENTIFY and keep its session but not act on events until its count is the bot's (the controller's
  total_shards). At the switch it keeps running (no stop, no new start) and the old set's shards stop
  with PXE_STOP_REASON=reshard.
A command that exits non-zero, or runs too long (a start 60 s, a stop the stop timeout; it is then killed
with its process group), has failed: a failed start is claimed again after a minute; a failed stop is
retried and the shard counts as running until then.
Without --on-start / --on-stop, shard events are only logged.

Session handoff: a shard the plan moves to another node RESUMEs there instead of spending an Identify.
  A start command sees PXE_START_MODE: "identify" (an Identify was granted: IDENTIFY) or "resume" (the
  previous owner's session was handed over: RESUME it), and for a resume PXE_RESUME_SESSION_ID,
  PXE_RESUME_SEQUENCE and PXE_RESUME_URL. A resuming start command that exits 75 says the gateway
  refused the resume: the agent claims a fresh Identify and runs the start command again with
  PXE_START_MODE=identify (from an identify start, exit 75 is an ordinary failure).
  A stop command may print the shard's session, still resumable, as its LAST line on stdout:
    {"session_id":"...","sequence":4711,"resume_url":"wss://gateway-us-east1-b.discord.gg"}
  After a plan move (PXE_STOP_REASON=plan) or when the node leaves (PXE_STOP_REASON=leave: SIGTERM) the
  agent deposits it with the controller for the new owner; after any other stop it is discarded. Any other last line means no session. Lines of command output
  that carry a session are never logged.

Logs are JSON lines (pino) on stdout.
SIGTERM or SIGINT: the node leaves. It stops every shard (PXE_STOP_REASON=leave; a stop command may
  print the session as after a plan move), sends the controller one last check-in that takes it out of
  the plan at once with those sessions (waiting at most 5 s, or a third of the lease, for the answer),
  then exits 0: the shards RESUME on other nodes within a check-in interval, not a lease later. If a stop
  fails, or no controller answers, the node's lease runs out instead (as after a crash). A second signal
  stops at once: stop commands still running are killed with their process group (their shards may
  still run), no leave is sent or waited for, exit 0.
A refused certificate: when every controller URL refuses it on new connections, twice in a row (a TLS
alert naming it, a 401, or closing the connection right after the TLS handshake, as a controller does
with a revoked or expired certificate), the agent stops every shard at once and exits 3. A refusal by
some controllers only (a replica misconfigured during a rollout, the others unreachable) is logged at
warn and the agent keeps trying; meanwhile the fail-safe stops the shards as for an unreachable
controller. A check-in answered 403 (the certificate is valid but may not act as this node) also stops
every shard and exits 3 at once.
If the controller rejects a plan signed with a key missing from plan-jwks.json (after "pxe-pki plan-key
rotate"), copy the new plan-jwks.json into the bundle: it is read again without a restart.

Exit status: 0 stopped by a signal (after leaving, or at once after a second signal); 1 unusable bundle, token, CA file or state file, or a metrics port
or REST proxy that cannot be listened on (or @discordjs/rest missing for --rest-proxy); 2 bad command line; 3 every controller refused this node's certificate, as
above (every shard was stopped first; the reason on stderr), or the enrollment was denied by the signer
or refused by the controller (the reason on stderr); 4 the stop timeout does not fit the controller's
lease (every shard was stopped first).

Example:
  pxe-node --bundle /etc/pxe-node/compaq-01 \\
    --controller https://10.0.0.5:8443,https://10.0.0.6:8443 --capacity 16 \\
    --state-file /var/lib/pxe-node/state.json \\
    --on-start 'systemctl start "discord-gateway@$PXE_TOTAL_SHARDS-$PXE_SHARD_ID"' \\
    --on-stop 'systemctl stop "discord-gateway@$PXE_TOTAL_SHARDS-$PXE_SHARD_ID"'
  pxe-node --enroll https://10.0.0.5:8444 --token-file /run/pxe/token --name compaq-01 \\
    --ca-file /run/pxe/ca.pem --controller https://10.0.0.5:8443 --capacity 16
`

function integer(flag: string, value: string, min: number, max: number): number {
  if (!/^\d{1,9}$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new UsageError(`--${flag} must be an integer in ${min}..${max} (got ${JSON.stringify(value.slice(0, 32))})`)
  }
  return Number(value)
}

function nonEmpty(flag: string, value: string | undefined): string | null {
  if (value === undefined) return null
  if (value.trim() === '') throw new UsageError(`--${flag} must not be empty`)
  return value
}

function controllers(value: string, flag = 'controller'): string[] {
  const urls = value.split(',').map((u) => u.trim())
  for (const url of urls) {
    const problem = url === '' ? 'is empty' : controllerUrlProblem(url)
    if (problem !== null) throw new UsageError(`--${flag}: ${JSON.stringify(url.slice(0, 64))} ${problem}`)
  }
  if (new Set(urls.map((u) => new URL(u).origin)).size !== urls.length) throw new UsageError(`--${flag}: a URL is listed twice`)
  return urls
}

const ENROLL_ONLY = ['token-file', 'token-env', 'name', 'ca-file', 'state-dir'] as const

/** --enroll and its companions, or null when --enroll is absent (then none of them may be given). */
function enrollArgs(v: OptionValues): EnrollArgs | null {
  if (v.enroll === undefined) {
    const stray = ENROLL_ONLY.find((flag) => v[flag] !== undefined)
    if (stray !== undefined) throw new UsageError(`--${stray} needs --enroll URL`)
    return null
  }
  const urls = controllers(v.enroll, 'enroll')
  const file = nonEmpty('token-file', v['token-file'])
  const env = nonEmpty('token-env', v['token-env'])
  if ((file === null) === (env === null)) throw new UsageError('--enroll needs the token from one of --token-file FILE or --token-env VAR')
  if (env !== null && !/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(env)) throw new UsageError('--token-env must name an environment variable (letters, digits, _), not hold the token')
  const name = nonEmpty('name', v.name)
  if (name === null) throw new UsageError("--enroll needs --name NAME (the node's name, the certificate's CN)")
  const problem = nameProblem(name)
  if (problem !== null) throw new UsageError(`--name ${problem}`)
  const caFile = nonEmpty('ca-file', v['ca-file'])
  if (caFile === null) throw new UsageError('--enroll needs --ca-file CA.pem (the controller CA)')
  return { urls, token: file !== null ? { file } : { env: env! }, name, caFile, stateDir: nonEmpty('state-dir', v['state-dir']) }
}

function tokenize(argv: string[]) {
  try {
    return parseArgv(argv, OPTIONS, { allowPositionals: false })
  } catch (err) {
    // One line that names the argument, and the flag meant when one is close (--capcity → --capacity).
    if (err instanceof ArgvError) throw new UsageError(err.message)
    throw err
  }
}

/** Parses argv (without node and the script); throws UsageError. */
export function parseCliArgs(argv: string[]): CliArgs {
  const parsed = tokenize(argv)
  const twice = repeatedFlag(parsed.options)
  if (twice !== null) throw new UsageError(`--${twice} is given more than once`)
  const v = parsed.values as OptionValues
  if (v.help || v.version) return { help: v.help === true, version: v.version === true && v.help !== true, bundle: '', enroll: null, controllers: [], capacity: DEFAULT_CAPACITY, stateFile: null, logLevel: 'info', onStart: null, onStop: null, clockSkewMs: DEFAULT_CLOCK_SKEW_MS, stopTimeoutMs: null, metrics: null, restProxy: null }
  const bundle = nonEmpty('bundle', v.bundle)
  const enroll = enrollArgs(v)
  if (bundle !== null && enroll !== null) throw new UsageError('--bundle and --enroll are exclusive: a node uses a bundle or enrolls')
  if (bundle === null && enroll === null) throw new UsageError('--bundle DIR is required (the folder made by "pxe-pki issue NAME --role node")')
  if (v.controller === undefined) throw new UsageError('--controller URL[,URL...] is required')
  const logLevel = v['log-level'] ?? 'info'
  if (!LOG_LEVELS.includes(logLevel)) throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(', ')}`)
  return {
    help: false,
    version: false,
    bundle: bundle ?? '',
    enroll,
    controllers: controllers(v.controller),
    capacity: v.capacity === undefined ? DEFAULT_CAPACITY : integer('capacity', v.capacity, 1, 128),
    stateFile: nonEmpty('state-file', v['state-file']),
    logLevel,
    onStart: nonEmpty('on-start', v['on-start']),
    onStop: nonEmpty('on-stop', v['on-stop']),
    clockSkewMs: v['clock-skew-ms'] === undefined ? DEFAULT_CLOCK_SKEW_MS : integer('clock-skew-ms', v['clock-skew-ms'], 0, MAX_CLOCK_SKEW_MS),
    stopTimeoutMs: v['stop-timeout-ms'] === undefined ? null : integer('stop-timeout-ms', v['stop-timeout-ms'], MIN_STOP_TIMEOUT_MS, MAX_STOP_TIMEOUT_MS),
    metrics: metricsListener(v['metrics-port'], v['metrics-host'], v['metrics-allow-remote'] === true),
    restProxy: restProxyArgs(v['rest-proxy'], v['rest-upstream']),
  }
}

/** --rest-proxy HOST:PORT and --rest-upstream URL (which needs it). */
function restProxyArgs(listen: string | undefined, upstream: string | undefined): CliArgs['restProxy'] {
  if (listen === undefined) {
    if (upstream !== undefined) throw new UsageError('--rest-upstream needs --rest-proxy HOST:PORT')
    return null
  }
  let address: ListenAddress
  try {
    address = parseListenAddress(listen)
  } catch (err) {
    throw new UsageError(`--rest-proxy ${(err as Error).message}`)
  }
  const base = nonEmpty('rest-upstream', upstream)
  const problem = base === null ? null : upstreamProblem(base)
  if (problem !== null) throw new UsageError(`--rest-upstream ${JSON.stringify(base!.slice(0, 64))} ${problem}`)
  return { listen: address, upstream: base }
}

/** The metrics listener's address; plain HTTP beyond loopback only when asked for (as the controller's `ops.allow_remote`). */
function metricsListener(port: string | undefined, host: string | undefined, allowRemote: boolean): CliArgs['metrics'] {
  if (port === undefined) {
    if (host !== undefined || allowRemote) throw new UsageError(`--${host !== undefined ? 'metrics-host' : 'metrics-allow-remote'} needs --metrics-port`)
    return null
  }
  const listenHost = nonEmpty('metrics-host', host) ?? DEFAULT_METRICS_HOST
  if (!allowRemote && !isLoopbackHost(listenHost)) {
    throw new UsageError(`--metrics-host ${JSON.stringify(listenHost.slice(0, 64))} is not a loopback address; the metrics listener is plain HTTP without authentication, so serving it beyond this host needs --metrics-allow-remote`)
  }
  return { host: listenHost, port: integer('metrics-port', port, 0, 65_535) }
}
