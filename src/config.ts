/**
 * The controller's configuration file (SPEC "Running"): zod-validated, unknown keys refused, every
 * error naming its key, relative paths resolved against the file's folder.
 */
import { readFile, stat } from 'node:fs/promises'
import { hostname } from 'node:os'
import { dirname, resolve } from 'node:path'
import { z } from 'zod'
import type { ControllerSettings } from './core/types.js'
import { haConfigSchema, resolveHaConfig, type HaConfig } from './ha/ha-config.js'
import { isLoopbackHost } from './net/host.js'
import { allowedHostProblem, DEFAULT_ALLOWED_RESUME_HOSTS } from './core/resume-url.js'
import { DEFAULT_SESSION_TTL_SECONDS } from './core/session-vault.js'

const pathSchema = z.string().min(1, 'must be a non-empty path')
const int = (min: number, max: number) => z.number().int().min(min).max(max)

/** One role's token bucket: `per_second` tokens refill continuously up to `burst`. */
const bucketSchema = z
  .object({ per_second: z.number().positive().max(1_000_000), burst: int(1, 1_000_000) })
  .strict()

/** SPEC "Rate limits" defaults: a node checks in every few seconds and claims a few Identifies a second. */
export const DEFAULT_RATE_LIMITS = {
  node: { per_second: 5, burst: 20 },
  operator: { per_second: 20, burst: 40 },
  // the CA host's signer posts one answer per request: a boot storm of a thousand nodes is a thousand posts
  signer: { per_second: 200, burst: 1000 },
} as const

/** SPEC "Device enrollment and renewal": the enrollment listener's defaults (it is off unless configured). */
export const DEFAULT_ENROLL = { poll_after_ms: 2000, per_address: { per_second: 2, burst: 20 }, per_address_pending: 8, per_token_pending: 2000 } as const

/** The enrollment listener: TLS with the server certificate, no client certificate asked. */
const enrollSchema = z
  .object({
    host: z.string().min(1).max(255),
    port: int(0, 65535),
    poll_after_ms: int(200, 60_000).default(DEFAULT_ENROLL.poll_after_ms),
    per_address: bucketSchema.default(DEFAULT_ENROLL.per_address),
    per_address_pending: int(1, 10_000).default(DEFAULT_ENROLL.per_address_pending),
    per_token_pending: int(1, 10_000).default(DEFAULT_ENROLL.per_token_pending),
  })
  .strict()

/** SPEC "Operations endpoint" default: plain HTTP on loopback (`"ops": null` turns it off). */
export const DEFAULT_OPS = { host: '127.0.0.1', port: 9464, allow_remote: false } as const

/** SPEC "Session handoff": where a deposited session may send the next owner, and how long it is held. */
const sessionHandoffSchema = z
  .object({
    allowed_hosts: z
      .array(
        z.string().superRefine((host, ctx) => {
          const problem = allowedHostProblem(host)
          if (problem !== null) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(host.slice(0, 64))} ${problem}` })
        }),
      )
      .max(64)
      .default([...DEFAULT_ALLOWED_RESUME_HOSTS]),
    ttl_seconds: int(1, 300).default(DEFAULT_SESSION_TTL_SECONDS),
  })
  .strict()

/** SPEC "REST budget": the bot's REST limits, shared among the nodes (off when absent). */
const restSchema = z
  .object({
    global_per_second: int(1, 100_000).default(50),
    safety: z.number().gt(0, 'must be above 0').max(1, 'must be at most 1 (a share above the limit is no safety)').default(0.9),
    invalid_per_10_minutes: int(1, 10_000_000).default(10_000),
  })
  .strict()

/** The ops listener serves plain HTTP: a non-loopback host must be asked for explicitly. */
const opsSchema = z
  .object({
    host: z.string().min(1).max(255).default(DEFAULT_OPS.host),
    port: int(0, 65535).default(DEFAULT_OPS.port),
    allow_remote: z.boolean().default(DEFAULT_OPS.allow_remote),
  })
  .strict()
  .superRefine((o, ctx) => {
    if (o.allow_remote || isLoopbackHost(o.host)) return
    ctx.addIssue({
      code: 'custom',
      path: ['host'],
      message: `"${o.host}" is not a loopback address; the ops endpoint is plain HTTP, so serving it beyond this host needs "ops": {..., "allow_remote": true}`,
    })
  })

export const configFileSchema = z
  .object({
    listen: z.object({ host: z.string().min(1), port: int(0, 65535) }).strict(),
    tls: z.object({ ca: pathSchema, cert: pathSchema, key: pathSchema, crl: pathSchema }).strict(),
    plan_keys: pathSchema,
    // required without ha; with ha the state lives in etcd and state_dir, if given, is only read once to
    // seed an empty etcd (moving a single controller to HA keeps its generation)
    state_dir: pathSchema.optional(),
    audit_log: pathSchema,
    controller_id: z.string().regex(/^[\x21-\x7e]{1,128}$/, 'must be 1-128 printable ASCII characters').optional(),
    total_shards: int(1, 65536),
    max_concurrency: int(1, 65536).default(1),
    lease_seconds: int(1, 3600).default(30),
    // Discord's window is 5 s and grants at exactly 5 s draw INVALID_SESSION: below 5000 is refused.
    identify_interval_ms: int(5000, 60_000).default(5100),
    daily_identify_limit: int(1, 1_000_000).optional(),
    // SPEC "Planner choice": contiguous (the default) or stable; changing it between runs is a reshard.
    planner: z.enum(['contiguous', 'stable']).optional(),
    rest: restSchema.optional(),
    session_handoff: sessionHandoffSchema.default({ allowed_hosts: [...DEFAULT_ALLOWED_RESUME_HOSTS], ttl_seconds: DEFAULT_SESSION_TTL_SECONDS }),
    rate_limits: z
      .object({
        node: bucketSchema.default(DEFAULT_RATE_LIMITS.node),
        operator: bucketSchema.default(DEFAULT_RATE_LIMITS.operator),
        signer: bucketSchema.default(DEFAULT_RATE_LIMITS.signer),
      })
      .strict()
      .default(DEFAULT_RATE_LIMITS),
    max_connections_per_address: int(1, 1_000_000).default(64),
    max_connections: int(1, 10_000_000).default(20_000),
    ops: opsSchema.nullable().default({ ...DEFAULT_OPS }),
    enroll: enrollSchema.optional(),
    ha: haConfigSchema.optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.enroll !== undefined && c.enroll.port !== 0 && (c.enroll.port === c.listen.port || (c.ops !== null && c.enroll.port === c.ops.port))) {
      ctx.addIssue({ code: 'custom', path: ['enroll', 'port'], message: 'must differ from listen.port and ops.port' })
    }
    if (c.ops !== null && c.ops.port !== 0 && c.ops.port === c.listen.port) {
      ctx.addIssue({ code: 'custom', path: ['ops', 'port'], message: `must differ from listen.port (${c.listen.port})` })
    }
    if (c.state_dir === undefined && c.ha === undefined) {
      ctx.addIssue({ code: 'custom', path: ['state_dir'], message: 'is required (expected string) unless "ha" keeps the state in etcd' })
    }
    if (c.max_concurrency > 1 && c.total_shards % c.max_concurrency !== 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['total_shards'],
        message: `must be a multiple of max_concurrency (${c.max_concurrency}) when max_concurrency is above 1, as Discord requires`,
      })
    }
  })

/** The validated, resolved configuration the process runs with. */
export interface Config {
  readonly listen: { readonly host: string; readonly port: number }
  readonly tls: { readonly ca: string; readonly cert: string; readonly key: string; readonly crl: string }
  readonly planKeys: string
  /** The file store's folder; with `ha`, null or a state only read to seed an empty etcd. */
  readonly stateDir: string | null
  readonly auditLog: string
  readonly controllerId: string
  readonly settings: ControllerSettings
  readonly limits: Limits
  /** The operations endpoint (metrics, health, readiness), or null when turned off. */
  readonly ops: OpsConfig | null
  /** The enrollment listener, or null (off). */
  readonly enroll: EnrollConfig | null
  /** High availability on etcd (SPEC "High availability"), or null: the file store. */
  readonly ha: HaConfig | null
}

/** Where the plain-HTTP operations endpoint listens. */
export interface OpsConfig {
  readonly host: string
  readonly port: number
  readonly allowRemote: boolean
}

/** The enrollment listener (SPEC "Device enrollment and renewal"). */
export interface EnrollConfig {
  readonly host: string
  readonly port: number
  readonly pollAfterMs: number
  readonly perAddress: RateLimit
  readonly perAddressPending: number
  readonly perTokenPending: number
}

/** A token bucket's refill rate and size. */
export interface RateLimit {
  readonly perSecond: number
  readonly burst: number
}

/** Request and connection limits (SPEC "Rate limits"). */
export interface Limits {
  readonly rate: { readonly node: RateLimit; readonly operator: RateLimit; readonly signer: RateLimit }
  readonly maxConnectionsPerAddress: number
  readonly maxConnections: number
}

/** A configuration problem; its message names the key and is meant for the operator. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError'
}

/** Formats zod issues as `key "a.b": problem` lines. */
function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const at = issue.path.join('.')
      if (issue.code === 'unrecognized_keys') {
        const keys = issue.keys.map((k) => (at ? `${at}.${k}` : k))
        return `unknown key${keys.length > 1 ? 's' : ''} ${keys.map((k) => `"${k}"`).join(', ')}`
      }
      // zod words a missing key as a type error ("expected string, received undefined")
      const missing = issue.code === 'invalid_type' ? /expected (\w+), received undefined$/.exec(issue.message) : null
      if (missing) return `key "${at}": is required (expected ${missing[1]})`
      return `key "${at || '(root)'}": ${issue.message}`
    })
    .join('; ')
}

/** Validates a parsed config object; `baseDir` resolves relative paths. */
export function parseConfig(raw: unknown, baseDir: string, source = 'config'): Config {
  const parsed = configFileSchema.safeParse(raw)
  if (!parsed.success) throw new ConfigError(`${source}: ${describeIssues(parsed.error)}`)
  const c = parsed.data
  const at = (p: string) => resolve(baseDir, p)
  return Object.freeze({
    listen: Object.freeze({ ...c.listen }),
    tls: Object.freeze({ ca: at(c.tls.ca), cert: at(c.tls.cert), key: at(c.tls.key), crl: at(c.tls.crl) }),
    planKeys: at(c.plan_keys),
    stateDir: c.state_dir === undefined ? null : at(c.state_dir),
    auditLog: at(c.audit_log),
    controllerId: c.controller_id ?? hostname(),
    settings: Object.freeze({
      totalShards: c.total_shards,
      maxConcurrency: c.max_concurrency,
      leaseSeconds: c.lease_seconds,
      identifyIntervalMs: c.identify_interval_ms,
      dailyIdentifyLimit: c.daily_identify_limit ?? null,
      ...(c.planner === undefined ? {} : { planner: c.planner }),
      sessionHandoff: Object.freeze({ allowedHosts: Object.freeze([...c.session_handoff.allowed_hosts]), ttlSeconds: c.session_handoff.ttl_seconds }),
      ...(c.rest === undefined ? {} : { rest: Object.freeze({ globalPerSecond: c.rest.global_per_second, safety: c.rest.safety, invalidPer10Minutes: c.rest.invalid_per_10_minutes }) }),
    }),
    limits: Object.freeze({
      rate: Object.freeze({
        node: Object.freeze({ perSecond: c.rate_limits.node.per_second, burst: c.rate_limits.node.burst }),
        operator: Object.freeze({ perSecond: c.rate_limits.operator.per_second, burst: c.rate_limits.operator.burst }),
        signer: Object.freeze({ perSecond: c.rate_limits.signer.per_second, burst: c.rate_limits.signer.burst }),
      }),
      maxConnectionsPerAddress: c.max_connections_per_address,
      maxConnections: c.max_connections,
    }),
    ops: c.ops === null ? null : Object.freeze({ host: c.ops.host, port: c.ops.port, allowRemote: c.ops.allow_remote }),
    enroll:
      c.enroll === undefined
        ? null
        : Object.freeze({
            host: c.enroll.host,
            port: c.enroll.port,
            pollAfterMs: c.enroll.poll_after_ms,
            perAddress: Object.freeze({ perSecond: c.enroll.per_address.per_second, burst: c.enroll.per_address.burst }),
            perAddressPending: c.enroll.per_address_pending,
            perTokenPending: c.enroll.per_token_pending,
          }),
    ha: c.ha === undefined ? null : resolveHaConfig(c.ha, baseDir),
  })
}

/** Refuses a private key file that group or others can read or write. */
export async function assertPrivateKeyFile(path: string, key: string): Promise<void> {
  let mode: number
  try {
    mode = (await stat(path)).mode
  } catch (err) {
    throw new ConfigError(`key "${key}": cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
  if ((mode & 0o077) !== 0) {
    const octal = (mode & 0o777).toString(8).padStart(4, '0')
    throw new ConfigError(`key "${key}": private key ${path} is accessible by group or others (mode ${octal}); run chmod 600 on it`)
  }
}

/** Reads, validates and resolves the config file, and checks the private key files' modes. */
export async function loadConfig(path: string): Promise<Config> {
  const file = resolve(path)
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    throw new ConfigError(`cannot read config ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch (err) {
    throw new ConfigError(`config ${file} is not valid JSON: ${(err as Error).message}`)
  }
  const config = parseConfig(raw, dirname(file), `config ${file}`)
  await assertPrivateKeyFile(config.tls.key, 'tls.key')
  await assertPrivateKeyFile(config.planKeys, 'plan_keys')
  if (config.ha !== null) await assertPrivateKeyFile(config.ha.etcd.key, 'ha.etcd.key')
  return config
}
