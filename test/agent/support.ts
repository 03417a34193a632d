/**
 * Helpers for the agent's tests: identities from a PKI made at run time, agents whose shard callbacks
 * record every start and stop (with the monotonic time), and polling.
 */
import { mkdirSync, readFileSync } from 'node:fs'
import https from 'node:https'
import type { TLSSocket } from 'node:tls'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import type { AgentEvent } from '../../src/agent/agent-events.js'
import type { NodeAgentOptions } from '../../src/agent/agent-options.js'
import { identityFromPem, type NodeIdentity } from '../../src/agent/identity.js'
import { NodeAgent } from '../../src/agent/node-agent.js'
import { commonGuild } from '../../src/core/snowflake.js'
import { bundle, startTestController, type Pki, type TestController } from '../e2e/harness.js'

/** Issues a node bundle with the toolkit and turns it into an in-memory identity. */
export async function nodeIdentity(pki: Pki, name: string): Promise<NodeIdentity & { serial: string }> {
  const id = await bundle(pki, name, 'node')
  const jwks = JSON.parse(readFileSync(join(pki.dir, 'plan-jwks.json'), 'utf8'))
  return { ...(await identityFromPem({ cert: id.cert, key: id.key, ca: pki.ca, jwks })), serial: id.serial }
}

/** Several identities, issued one after the other (the toolkit's PKI lock waits only 5 s). */
export async function nodeIdentities<const N extends readonly string[]>(pki: Pki, names: N): Promise<{ [K in keyof N]: NodeIdentity & { serial: string } }> {
  const out: (NodeIdentity & { serial: string })[] = []
  for (const name of names) out.push(await nodeIdentity(pki, name))
  return out as { [K in keyof N]: NodeIdentity & { serial: string } }
}

/** One shard start or stop as a callback saw it. */
export interface ShardEvent {
  readonly at: number
  /** Wall-clock ms, to compare with AgentStatus times. */
  readonly wall: number
  readonly node: string
  readonly shard: number
  /** The shard count the session was started (or stopped) under. */
  readonly totalShards: number
  readonly maxConcurrency: number
  readonly kind: 'start' | 'stop'
  readonly reason?: string
}

/** Everything a set of test agents did, on one timeline. */
export class Recorder {
  readonly shardEvents: ShardEvent[] = []
  readonly agentEvents: { at: number; node: string; event: AgentEvent }[] = []

  /** Shards running on `node` now, per the callbacks (of `totalShards` only, when given). */
  running(node: string, totalShards?: number): number[] {
    const set = new Map<string, number>() // shard/count → shard: a live reshard runs one number under two counts
    for (const e of this.shardEvents) {
      if (e.node !== node || (totalShards !== undefined && e.totalShards !== totalShards)) continue
      if (e.kind === 'start') set.set(`${e.shard}/${e.totalShards}`, e.shard)
      else set.delete(`${e.shard}/${e.totalShards}`)
    }
    return [...set.values()].sort((a, b) => a - b)
  }

  /**
   * The first moment from `from` on at which some guild was served by no running session (each judged
   * by its own shard count), or null when every guild was covered throughout (the guild-coverage check).
   * Guilds are classes modulo `modulus`, a common multiple of every shard count involved.
   */
  coverageGap(from: number, modulus: number): string | null {
    const open = new Map<string, ShardEvent>()
    const events = [...this.shardEvents].sort((a, b) => a.at - b.at)
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!
      const key = `${e.node}#${e.shard}/${e.totalShards}`
      if (e.kind === 'start') open.set(key, e)
      else open.delete(key)
      if (e.at < from || (events[i + 1] !== undefined && events[i + 1]!.at === e.at)) continue
      for (let guild = 0; guild < modulus; guild++) {
        let covered = false
        for (const s of open.values()) if (guild % s.totalShards === s.shard) covered = true
        if (!covered) return `guild class ${guild} (mod ${modulus}) had no session after ${e.kind} of shard ${e.shard}/${e.totalShards} on ${e.node}`
      }
    }
    return null
  }

  /**
   * Pairs of running sessions that served a common guild at the same moment, each judged by its own
   * shard count (must be empty): shard 0 of 16 and shard 16 of 32 both serve guild 16 << 22.
   */
  guildOverlaps(): string[] {
    const open = new Map<string, ShardEvent>() // node#shard → its start
    const out: string[] = []
    for (const e of [...this.shardEvents].sort((a, b) => a.at - b.at)) {
      const key = `${e.node}#${e.shard}/${e.totalShards}`
      if (e.kind === 'stop') {
        open.delete(key)
        continue
      }
      for (const other of open.values()) {
        const key = commonGuild(e.shard, e.totalShards, other.shard, other.totalShards)
        if (key !== null) out.push(`guild ${BigInt(key) << 22n}: ${e.node} started shard ${e.shard}/${e.totalShards} while ${other.node} ran shard ${other.shard}/${other.totalShards}`)
      }
      open.set(key, e)
    }
    return out
  }

  /** Events of one node of one type. */
  events<T extends AgentEvent['type']>(node: string, type: T): { at: number; event: Extract<AgentEvent, { type: T }> }[] {
    return this.agentEvents.filter((e) => e.node === node && e.event.type === type) as unknown as { at: number; event: Extract<AgentEvent, { type: T }> }[]
  }

  /** overlaps() among the sessions of 32 shards only (a live reshard runs two counts at once). */
  overlaps32(): string[] {
    const holder = new Map<number, string>()
    const out: string[] = []
    for (const e of [...this.shardEvents].filter((s) => s.totalShards === 32).sort((a, b) => a.at - b.at)) {
      if (e.kind === 'stop') {
        if (holder.get(e.shard) === e.node) holder.delete(e.shard)
        continue
      }
      const other = holder.get(e.shard)
      if (other !== undefined && other !== e.node) out.push(`shard ${e.shard}/32: ${e.node} started while ${other} ran it`)
      holder.set(e.shard, e.node)
    }
    return out
  }

  /** Pairs of nodes that ran the same shard at the same moment (must be empty). */
  overlaps(): string[] {
    const holder = new Map<number, string>()
    const out: string[] = []
    for (const e of [...this.shardEvents].sort((a, b) => a.at - b.at)) {
      if (e.kind === 'stop') {
        if (holder.get(e.shard) === e.node) holder.delete(e.shard)
        continue
      }
      const other = holder.get(e.shard)
      if (other !== undefined && other !== e.node) out.push(`shard ${e.shard}: ${e.node} started while ${other} ran it`)
      holder.set(e.shard, e.node)
    }
    return out
  }
}

/** Short, test-friendly timings (the controller's identify interval cannot go below 5000 ms). */
export const FAST = { handoffPollMs: 200, requestTimeoutMs: 2000 } as const

/** An agent whose callbacks record into `rec`. */
export function recordingAgent(rec: Recorder, identity: NodeIdentity, controllers: string[], extra: Partial<NodeAgentOptions> = {}): NodeAgent {
  const node = identity.nodeId
  return new NodeAgent({
    identity,
    controllers,
    capacity: 4,
    ...FAST,
    onStart: (ctx) => void rec.shardEvents.push({ at: performance.now(), wall: Date.now(), node, shard: ctx.shardId, totalShards: ctx.totalShards, maxConcurrency: ctx.maxConcurrency, kind: 'start' }),
    onStop: (ctx) => void rec.shardEvents.push({ at: performance.now(), wall: Date.now(), node, shard: ctx.shardId, totalShards: ctx.totalShards, maxConcurrency: ctx.maxConcurrency, kind: 'stop', reason: ctx.reason }),
    onEvent: (event) => void rec.agentEvents.push({ at: performance.now(), node, event }),
    ...extra,
  })
}

/** Polls `check` every 25 ms until it holds; rejects with `what` after `timeoutMs`. */
export async function until(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const start = performance.now()
  while (!check()) {
    if (performance.now() - start > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

/** Base URL of a controller on 127.0.0.1. */
export const urlOf = (port: number) => `https://127.0.0.1:${port}`

/** Starts an in-process controller with its state and audit log in a fresh folder `dir`. */
export function controllerIn(pki: Pki, dir: string, settings: Record<string, unknown>): Promise<TestController> {
  mkdirSync(dir, { recursive: true })
  return startTestController(pki, dir, settings)
}

/** A stand-in controller for failure cases: real mTLS with the PKI's server certificate, canned answers. */
export interface FakeController {
  readonly port: number
  /** Requests seen, as "CN METHOD PATH". */
  readonly seen: string[]
  /** Their JSON bodies (undefined when not JSON), in the same order. */
  readonly bodies: unknown[]
  /** TLS connections accepted so far. */
  connections(): number
  /** Of those, how many resumed a TLS session. */
  resumed(): number
  close(): Promise<void>
}

/** Answers every request with `answer(cn, path, body)`: a status and a JSON body. */
export async function fakeController(
  pki: Pki,
  answer: (cn: string, path: string, body: unknown) => { status: number; body: unknown; headers?: Record<string, string> },
  serverPki: Pki = pki,
  /** e.g. `ticketKeys`, shared by two stand-ins as HA replicas share theirs */
  tlsOptions: https.ServerOptions = {},
): Promise<FakeController> {
  const seen: string[] = []
  const bodies: unknown[] = []
  let connections = 0
  let resumed = 0
  const server = https.createServer(
    {
      ca: pki.ca,
      cert: readFileSync(join(serverPki.dir, 'server.pem')),
      key: readFileSync(join(serverPki.dir, 'server-key.pem')),
      requestCert: true,
      rejectUnauthorized: true,
      ...tlsOptions,
    },
    (req, res) => {
      const cn = String((req.socket as TLSSocket).getPeerCertificate().subject?.CN ?? '')
      seen.push(`${cn} ${req.method} ${req.url}`)
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => {
        let sent: unknown
        try {
          sent = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        } catch {
          sent = undefined
        }
        bodies.push(sent)
        const { status, body, headers } = answer(cn, req.url ?? '', sent)
        res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body))
      })
    },
  )
  server.on('secureConnection', (socket: TLSSocket) => {
    connections += 1
    if (socket.isSessionReused()) resumed += 1
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    bodies,
    connections: () => connections,
    resumed: () => resumed,
    close: () => new Promise((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}
