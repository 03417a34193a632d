/**
 * Test helpers for HA controllers: replicas over one PKI and one etcd (in-process, or as child processes
 * of the compiled controller for kill -9 and SIGSTOP), a fleet of nodes that check in the way the node
 * agent does (the controller list in order, the next one on a connection error or 503), and audit reads.
 */
import type { ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Test } from 'tap'
import { parseConfig } from '../../src/config.js'
import { startController, type RunningController } from '../../src/runtime.js'
import { bundle, checkinBody, request, testConfig, type Identity, type Pki, type Reply } from '../e2e/harness.js'
import { MAIN } from '../e2e/process.js'
import { exited, spawnGuarded, type EtcdCluster } from '../support/etcd-cluster.js'

/** The `ha` config section for a cluster (all its members unless `endpoints` says otherwise). */
export function haSection(cluster: EtcdCluster, prefix: string, ttl: number, endpoints?: readonly string[]): Record<string, unknown> {
  const { ca, cert, key } = cluster.connection
  return { etcd: { endpoints: [...(endpoints ?? cluster.connection.endpoints)], ca, cert, key }, prefix, lease_ttl_seconds: ttl }
}

/** One replica's config: the shared PKI, its own folder (audit log), no state_dir (the state is in etcd). */
export function replicaConfig(pki: Pki, root: string, id: string, ha: Record<string, unknown>, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const dir = join(root, id)
  mkdirSync(dir, { recursive: true })
  return { ...testConfig(pki, dir, { controller_id: id, ha, lease_seconds: 30, ...overrides }), state_dir: overrides.state_dir }
}

/** An in-process replica; stopped at the test's end. */
export async function startReplicaController(t: Test, pki: Pki, root: string, id: string, ha: Record<string, unknown>, overrides: Record<string, unknown> = {}): Promise<RunningController & { id: string; root: string }> {
  const config = parseConfig(replicaConfig(pki, root, id, ha, overrides), root)
  const running = await startController(config, { tickMs: 200 })
  t.teardown(() => running.stop())
  return Object.assign(running, { id, root: join(root, id) })
}

/** A replica in its own process (the compiled controller). */
export interface ReplicaProcess {
  readonly id: string
  readonly port: number
  readonly root: string
  readonly process: ChildProcess
  output(): string
  signal(signal: NodeJS.Signals): void
}

/** The replicas among `among` that serve operator requests now (the leader, or none during a take-over). */
export async function leadingReplicas<R extends { readonly port: number }>(among: readonly R[], ca: string, operator: Identity): Promise<R[]> {
  const answers = await Promise.all(among.map((r) => request(r.port, ca, operator, '/v1/plan').catch(() => null)))
  return among.filter((_, i) => answers[i]?.status === 200)
}

/** Starts `node dist/src/main.js --config` for a replica and resolves once it listens; killed at the test's end. */
export async function spawnReplicaController(
  t: Test,
  pki: Pki,
  root: string,
  id: string,
  ha: Record<string, unknown>,
  overrides: Record<string, unknown> = {},
  timeoutMs = 60_000,
): Promise<ReplicaProcess> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run "npm run build" (npm test does it first)`)
  const path = join(root, `${id}.json`)
  writeFileSync(path, JSON.stringify(replicaConfig(pki, root, id, ha, overrides)))
  const child = spawnGuarded(process.execPath, [MAIN, '--config', path], { env: { ...process.env, LOG_LEVEL: 'info' } })
  t.teardown(async () => {
    child.kill('SIGKILL')
    await exited(child)
  })
  let out = ''
  child.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-200_000)))
  child.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-200_000)))
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${id} did not listen within ${timeoutMs} ms\n${out}`)), timeoutMs)
    const check = () => {
      const m = /"port":(\d+),"mode":"[a-z]+","msg":"controller listening/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve(Number(m[1]))
      }
    }
    child.stdout!.on('data', check)
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      reject(new Error(`${id} exited (${code ?? signal}) before listening\n${out}`))
    })
  })
  return { id, port, root: join(root, id), process: child, output: () => out, signal: (s) => child.kill(s) }
}

/** The audit lines of a replica, parsed. */
export function auditOf(replicaRoot: string): Array<Record<string, any>> {
  const path = join(replicaRoot, 'audit.log')
  if (!existsSync(path)) return []
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, any>)
}

/** What a node was told by a check-in. */
export interface Renewal {
  readonly generation: number
  readonly rangeStart: number
  readonly rangeCount: number
  /** The port that answered. */
  readonly port: number
}

/** Nodes with real certificates that check in like the agent: the controller list in order. */
export class Fleet {
  private constructor(
    readonly ca: string,
    readonly nodes: ReadonlyArray<{ id: string; identity: Identity }>,
  ) {}

  static async create(pki: Pki, count: number): Promise<Fleet> {
    const nodes = []
    for (let i = 0; i < count; i++) nodes.push({ id: `node-${i}`, identity: await bundle(pki, `node-${i}`, 'node') })
    return new Fleet(pki.ca, nodes)
  }

  /** One call tried on each port in order until one answers other than 503 (or all fail): the agent's rule. */
  async call(ports: readonly number[], identity: Identity, path: string, body?: unknown): Promise<Reply & { port: number }> {
    let last: (Reply & { port: number }) | null = null
    for (const port of ports) {
      try {
        const reply = await request(port, this.ca, identity, path, body === undefined ? {} : { body })
        last = { ...reply, port }
        if (reply.status !== 503) return last
      } catch {
        // connection refused or reset: the next controller
      }
    }
    return last ?? { status: 0, headers: {}, text: 'no controller answered', json: null, port: 0 }
  }

  /** Every node checks in once (reporting `generation` when given); null for a node nobody served. */
  async checkInAll(ports: readonly number[], generation?: number): Promise<Map<string, Renewal | null>> {
    const out = new Map<string, Renewal | null>()
    await Promise.all(
      this.nodes.map(async ({ id, identity }) => {
        const extra = generation === undefined ? {} : { generation }
        const reply = await this.call(ports, identity, '/v1/checkin', checkinBody(id, { capacity: 8, ...extra }))
        out.set(id, reply.status === 200 ? { generation: reply.json.generation, rangeStart: reply.json.range_start, rangeCount: reply.json.range_count, port: reply.port } : null)
      }),
    )
    return out
  }
}

/** Ranges and generation per node, without who answered: what must not change across a take-over. */
export function assignments(renewals: Map<string, Renewal | null>): Record<string, string> {
  return Object.fromEntries([...renewals].map(([id, r]) => [id, r === null ? 'not served' : `g${r.generation} [${r.rangeStart}, +${r.rangeCount})`]))
}
