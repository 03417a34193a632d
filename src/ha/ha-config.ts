/**
 * The `ha` section of the controller's config (SPEC "High availability"), as a zod schema for
 * config.ts to embed, and its resolution (relative PEM paths against the config file's folder).
 */
import { isIP } from 'node:net'
import { resolve } from 'node:path'
import { z } from 'zod'
import type { EtcdConnectionConfig } from './etcd-api.js'
import { ETCD_DEFAULT_TXN_OPS, MIN_TXN_OPS } from './etcd-limits.js'

/** An etcd client URL: https only (etcd is reached over mutual TLS), host and port, nothing else. */
const endpointSchema = z.string().refine(
  (s) => {
    try {
      const u = new URL(s)
      return u.protocol === 'https:' && u.hostname !== '' && u.port !== '' && !u.username && !u.password && u.pathname === '/' && !u.search && !u.hash
    } catch {
      return false
    }
  },
  { message: 'must be an https://host:port URL (etcd is reached over mutual TLS)' },
)

const pathSchema = z.string().min(1, 'must be a non-empty path')

const DNS_NAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/
/** A DNS name for SNI: RFC 6066 allows no IP address there (Node warns DEP0123 on one). */
const serverNameSchema = z.string().refine((s) => DNS_NAME.test(s) && isIP(s) === 0, { message: 'must be a DNS name (not an IP address) that every member\'s server certificate carries' })

/** The most max_txn_ops we accept: past it a transaction meets etcd's request-size limit (1.5 MiB by default) long before the count. */
const MAX_TXN_OPS = 65_536

/** `"ha": {"etcd": {endpoints, ca, cert, key, server_name?, max_txn_ops?}, "prefix", "lease_ttl_seconds"}`. */
export const haConfigSchema = z
  .object({
    etcd: z
      .object({
        endpoints: z.array(endpointSchema).min(1, 'must list at least one etcd endpoint').max(15),
        ca: pathSchema,
        cert: pathSchema,
        key: pathSchema,
        // with IP endpoints: the name SNI and the certificate check use (else Node warns DEP0123, once)
        server_name: serverNameSchema.optional(),
        // the members' --max-txn-ops: a large change goes out in fewer transactions, each one round trip
        max_txn_ops: z.number().int().min(MIN_TXN_OPS).max(MAX_TXN_OPS).default(ETCD_DEFAULT_TXN_OPS),
      })
      .strict(),
    // keys are <prefix>election/..., <prefix>state/...: one deployment per prefix
    prefix: z
      .string()
      .max(128)
      .regex(/^\/(?:[A-Za-z0-9._-]+\/)+$/, 'must be a key prefix like /pxe/ (segments of A-Z a-z 0-9 . _ -, each ending in /)')
      .default('/pxe/'),
    // below 2 s etcd raises the TTL itself; the renew deadline (2/3 TTL) must outlast an etcd election
    lease_ttl_seconds: z.number().int().min(2).max(300).default(10),
  })
  .strict()

/** The `ha` section as written in the file. */
export type HaConfigFile = z.infer<typeof haConfigSchema>

/** The resolved `ha` section the process runs with. */
export interface HaConfig {
  readonly etcd: EtcdConnectionConfig
  readonly prefix: string
  readonly leaseTtlSeconds: number
  /** The most operations one transaction may carry: the members' --max-txn-ops (etcd's default, 128, unless set). */
  readonly maxTxnOps: number
}

/** Resolves a parsed `ha` section: PEM paths against `baseDir`, names in camelCase. */
export function resolveHaConfig(ha: HaConfigFile, baseDir: string): HaConfig {
  const at = (p: string) => resolve(baseDir, p)
  return Object.freeze({
    etcd: Object.freeze({
      endpoints: Object.freeze([...ha.etcd.endpoints]),
      ca: at(ha.etcd.ca),
      cert: at(ha.etcd.cert),
      key: at(ha.etcd.key),
      ...(ha.etcd.server_name === undefined ? {} : { serverName: ha.etcd.server_name }),
    }),
    prefix: ha.prefix,
    leaseTtlSeconds: ha.lease_ttl_seconds,
    maxTxnOps: ha.etcd.max_txn_ops,
  })
}
