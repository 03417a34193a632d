/**
 * The etcd side of `npm run bench:fleet -- --ha`: a local 3-member etcd with client and peer mutual TLS
 * started for the run (as deploy/ha-local.sh does), or an existing one named by `--ha-etcd FILE` (the
 * `etcd` object of a controller's `ha` section: endpoints, ca, cert, key, optional server_name; paths
 * relative to the file). Each run writes under a prefix of its own, removed afterwards from an existing
 * etcd. It reads etcd's own counters (puts, deletes, transactions: /metrics of the first endpoint, over
 * the same mutual TLS) and, for members started here, their CPU.
 */
import { readFile } from 'node:fs/promises'
import https from 'node:https'
import { dirname, resolve } from 'node:path'
import { haConfigSchema } from '../../../src/ha/ha-config.js'
import { connectEtcd } from '../../../src/ha/etcd-client.js'
import { prefixRangeEnd, type EtcdConnectionConfig } from '../../../src/ha/etcd-api.js'
import { startEtcdMembers, type EtcdMembers } from '../../support/etcd-process.js'
import { sampleProcess } from './proc-stats.js'

/** etcd's counters of applied writes (the member's view; every member applies every write). */
export interface EtcdCounters {
  readonly puts: number
  readonly deletes: number
  readonly txns: number
}

/** What a bench run needs of its etcd. */
export interface HaSide {
  /** Where it is, and from where (`started`: 3 members started for this run). */
  readonly connection: EtcdConnectionConfig
  readonly origin: 'started' | string
  /** The `ha` section of every replica's config. */
  section(prefix: string, ttlSeconds: number): Record<string, unknown>
  counters(): Promise<EtcdCounters>
  /** CPU seconds of the members started here (null for an existing etcd: not ours to measure). */
  cpuSeconds(): number | null
  /** Removes `prefix` (an existing etcd keeps nothing of a run). */
  dropPrefix(prefix: string): Promise<void>
  close(): Promise<void>
}

const etcdFileSchema = haConfigSchema.shape.etcd

/** The --max-txn-ops of the members a run starts, and the max_txn_ops the replicas are given with them (see deploy/ha-local.sh). */
export const STARTED_MAX_TXN_OPS = 4096

/** An etcd named by `--ha-etcd FILE`: how to reach it, and its members' --max-txn-ops (`max_txn_ops`, else 128). */
export interface HaEtcdFile {
  readonly connection: EtcdConnectionConfig
  readonly maxTxnOps: number
}

/** Reads `--ha-etcd FILE`; throws with the field at fault. */
export async function readHaEtcdFile(file: string): Promise<HaEtcdFile> {
  let raw: unknown
  try {
    raw = JSON.parse(await readFile(file, 'utf8'))
  } catch (err) {
    throw new Error(`--ha-etcd ${file}: ${(err as Error).message}`)
  }
  const parsed = etcdFileSchema.safeParse(raw)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    throw new Error(`--ha-etcd ${file}: ${issue.path.join('.') || 'the file'}: ${issue.message} (expected {"endpoints": [...], "ca", "cert", "key", "server_name"?, "max_txn_ops"?})`)
  }
  const at = (p: string) => resolve(dirname(file), p)
  const e = parsed.data
  return {
    connection: { endpoints: e.endpoints, ca: at(e.ca), cert: at(e.cert), key: at(e.key), ...(e.server_name === undefined ? {} : { serverName: e.server_name }) },
    maxTxnOps: e.max_txn_ops,
  }
}

const METRIC = /^(etcd_mvcc_put_total|etcd_mvcc_delete_total|etcd_mvcc_txn_total) ([0-9.e+]+)$/gm

async function fetchCounters(c: EtcdConnectionConfig): Promise<EtcdCounters> {
  const [ca, cert, key] = await Promise.all([readFile(c.ca), readFile(c.cert), readFile(c.key)])
  const url = new URL('/metrics', c.endpoints[0])
  const text = await new Promise<string>((resolvePromise, reject) => {
    const req = https.get(url, { ca, cert, key, ...(c.serverName === undefined ? {} : { servername: c.serverName }), timeout: 5000 }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => (res.statusCode === 200 ? resolvePromise(Buffer.concat(chunks).toString('utf8')) : reject(new Error(`etcd /metrics: HTTP ${res.statusCode}`))))
      res.on('error', reject)
    })
    req.on('timeout', () => req.destroy(new Error('etcd /metrics: no answer within 5 s')))
    req.on('error', reject)
  })
  const found: Record<string, number> = {}
  for (const m of text.matchAll(METRIC)) found[m[1]!] = Number(m[2])
  const need = ['etcd_mvcc_put_total', 'etcd_mvcc_delete_total', 'etcd_mvcc_txn_total']
  const missing = need.filter((name) => found[name] === undefined)
  if (missing.length > 0) throw new Error(`etcd /metrics lacks ${missing.join(', ')}`)
  return { puts: found.etcd_mvcc_put_total!, deletes: found.etcd_mvcc_delete_total!, txns: found.etcd_mvcc_txn_total! }
}

/** Starts 3 members (null `file`) or opens the etcd of `file`, and checks its counters can be read. */
export async function openHaSide(file: string | null, log: (line: string) => void): Promise<HaSide> {
  let members: EtcdMembers | null = null
  let connection: EtcdConnectionConfig
  let maxTxnOps: number
  if (file === null) {
    members = await startEtcdMembers(3, { maxTxnOps: STARTED_MAX_TXN_OPS })
    connection = members.connection
    maxTxnOps = STARTED_MAX_TXN_OPS
    log(`  etcd: 3 members with client and peer mutual TLS at ${connection.endpoints.join(', ')}, --max-txn-ops ${maxTxnOps}`)
  } else {
    ;({ connection, maxTxnOps } = await readHaEtcdFile(file))
    log(`  etcd: ${connection.endpoints.join(', ')} (from ${file}), max_txn_ops ${maxTxnOps}`)
  }
  try {
    await fetchCounters(connection)
  } catch (err) {
    await members?.close()
    throw err
  }
  const pids = () => (members?.members ?? []).map((m) => m.process?.pid).filter((p): p is number => p !== undefined)
  return {
    connection,
    origin: file ?? 'started',
    section: (prefix, ttlSeconds) => ({
      etcd: {
        endpoints: [...connection.endpoints],
        ca: connection.ca,
        cert: connection.cert,
        key: connection.key,
        ...(connection.serverName === undefined ? {} : { server_name: connection.serverName }),
        max_txn_ops: maxTxnOps,
      },
      prefix,
      lease_ttl_seconds: ttlSeconds,
    }),
    counters: () => fetchCounters(connection),
    cpuSeconds: () => (members === null ? null : pids().reduce((sum, pid) => sum + (sampleProcess(pid)?.cpuSeconds ?? 0), 0)),
    dropPrefix: async (prefix) => {
      const client = await connectEtcd(connection)
      try {
        await client.txn({ compare: [], success: [{ type: 'delete', key: prefix, rangeEnd: prefixRangeEnd(prefix) }] })
      } finally {
        await client.close()
      }
    },
    close: async () => {
      await members?.close()
    },
  }
}

/** Counters after minus before. */
export function countersSince(before: EtcdCounters, after: EtcdCounters): EtcdCounters {
  return { puts: after.puts - before.puts, deletes: after.deletes - before.deletes, txns: after.txns - before.txns }
}
