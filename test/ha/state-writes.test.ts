// The etcd state store's write order, without etcd: random controller histories are written as the store
// writes them (deltaWrites, reconcileWrites), and a leader taking over after ANY prefix of a write's
// operations is checked for safety: it loads (decodeState), restores a Controller exactly as after a
// restart, and must never let a shard be identified by a new owner while a node that may still run it
// has not confirmed stopping; the generation never goes back; no counted grant is lost. After the whole
// write, the load equals the controller's snapshot. Etcd's key-value semantics (put, delete, range
// delete in byte order) are modelled by a sorted map here; etcd-state-store.test.ts runs the real thing.
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import type { DurableState } from '../../src/core/durable-state.js'
import { DAILY_WINDOW_MS } from '../../src/core/identify.js'
import type { ControllerSettings } from '../../src/core/types.js'
import type { EtcdKeyValue } from '../../src/ha/etcd-api.js'
import type { WriteOp } from '../../src/ha/etcd-limits.js'
import { decodeState } from '../../src/ha/state-decode.js'
import { StateLayout } from '../../src/ha/state-layout.js'
import { deltaWrites, reconcileWrites, type WriteContext } from '../../src/ha/state-writes.js'
import { body, cert, seededRandom, T0 } from '../core/fixtures.js'

const SETTINGS: ControllerSettings = { totalShards: 24, maxConcurrency: 4, leaseSeconds: 30, identifyIntervalMs: 5100, dailyIdentifyLimit: 50 }
const NAMES = ['a', 'B', 'c-1', 'C.2', 'd_3']
const layout = new StateLayout('/pxe/')

/** etcd's key space, enough of it: keys in byte order, the four write operations. */
class KeySpace {
  readonly kv = new Map<string, string>()
  apply(ops: readonly WriteOp[]): this {
    for (const op of ops) {
      if (op.type === 'put') this.kv.set(op.key, op.value.toString())
      else if (op.type === 'delete') this.kv.delete(op.key)
      else {
        const [from, to] = op.type === 'delete_prefix' ? [op.prefix, `${op.prefix}\uffff`] : [op.key, op.rangeEnd]
        for (const key of [...this.kv.keys()]) if (key >= from && key < to) this.kv.delete(key)
      }
    }
    return this
  }
  copy(): KeySpace {
    const next = new KeySpace()
    for (const [k, v] of this.kv) next.kv.set(k, v)
    return next
  }
  entries(): EtcdKeyValue[] {
    return [...this.kv.keys()]
      .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
      .map((key) => ({ key, value: Buffer.from(this.kv.get(key)!), createRevision: '1', modRevision: '1', version: '1', lease: '0' }))
  }
}

/**
 * Which node may be running which shard, as the nodes would see it: a node starts a shard once a grant
 * was released to it (after the write that recorded it), and stops it once it reports the generation
 * that took the shard away, or when it is dropped (expired, or revoked: SPEC "Handoff safety").
 */
class Running {
  private readonly owners: (string | null)[] = Array.from({ length: SETTINGS.totalShards }, () => null)
  /** `node/shard` → the generation that took the shard from the node (null: it still owns it). */
  private readonly running = new Map<string, number | null>()
  /** Grants recorded since the last complete write (not answered yet), in the same form. */
  private granted = new Map<string, number | null>()

  /** After each settled operation: grants, drops, a reported generation, changes of owner. */
  observe(c: Controller, report: { readonly nodeId: string; readonly generation: number } | null): void {
    for (const e of c.drainEvents()) {
      if (e.kind === 'identify_granted') this.granted.set(`${e.nodeId}/${e.shardId}`, null)
      if (e.kind === 'node_expired' || e.kind === 'node_removed') this.forget((node) => node === e.nodeId)
    }
    if (report !== null) this.forget((node, left) => node === report.nodeId && left !== null && report.generation >= left)
    this.owners.forEach((previous, shardId) => {
      const owner = c.ownerOf(shardId)
      if (owner === previous) return
      const key = `${previous}/${shardId}`
      for (const map of [this.running, this.granted]) if (map.has(key)) map.set(key, c.generation)
      this.owners[shardId] = owner
    })
  }

  /** A write completed: the grants it recorded were answered, so those nodes start their shards. */
  released(): void {
    for (const [key, left] of this.granted) this.running.set(key, left)
    this.granted = new Map()
  }

  /** The nodes that may be running `shardId`. */
  of(shardId: number): string[] {
    return [...this.running.keys()].filter((k) => k.endsWith(`/${shardId}`)).map((k) => k.slice(0, k.lastIndexOf('/')))
  }

  private forget(match: (node: string, left: number | null) => boolean): void {
    for (const map of [this.running, this.granted]) {
      for (const [key, left] of map) if (match(key.slice(0, key.lastIndexOf('/')), left)) map.delete(key)
    }
  }
}

/**
 * What a leader taking over with `loaded` would get wrong, given the last state whose answers were
 * released (`committed`), or null: a node that may be running a shard while the new leader would let
 * another node identify it; a generation that went back; a counted grant that was lost.
 */
function unsafe(loaded: DurableState | null, committed: DurableState | null, running: Running, now: number): string | null {
  if (committed === null) return null
  if (loaded === null) return 'the state vanished'
  if (loaded.meta.generation < committed.meta.generation) return `generation went back from ${committed.meta.generation} to ${loaded.meta.generation}`
  const inWindow = committed.dailyGrants.filter((g) => now - g < DAILY_WINDOW_MS)
  if (inWindow.filter((g) => !loaded.dailyGrants.includes(g)).length > 0) return 'a counted grant was lost'
  const after = new Controller(SETTINGS, { state: loaded, now })
  for (let shardId = 0; shardId < SETTINGS.totalShards; shardId++) {
    const owner = after.ownerOf(shardId)
    const others = running.of(shardId).filter((nodeId) => nodeId !== owner)
    if (owner === null || others.length === 0) continue
    const claim = after.claimIdentify(now, { node_id: owner, shard_id: shardId })
    if (!(claim.granted === false && claim.reason === 'handoff_pending')) return `shard ${shardId}: ${owner} is not held back while ${others.join(', ')} may run it`
  }
  return null
}

/** Runs one random history; returns the first problem found, or null. */
function history(seed: number, reconcileEvery: number): string | null {
  const random = seededRandom(seed)
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!
  let n = 0
  const ctx: WriteContext = { layout, grantId: () => `7.${++n}` }
  const c = new Controller(SETTINGS)
  const reports = new Map<string, number>()
  const running = new Running()
  let etcd = new KeySpace()
  let now = T0
  for (let write = 1; write <= 25; write++) {
    for (let i = 0, ops = 1 + Math.floor(random() * 6); i < ops; i++) {
      const report = step(c, (now += random() < 0.05 ? 31_000 : Math.floor(random() * 9000)), pick, random, reports)
      c.settle()
      running.observe(c, report)
    }
    const committed = decodeState(layout, etcd.entries())
    const full = c.snapshot()
    const delta = c.takeDelta()
    // every few writes, one that failed half-way (etcd holds a prefix of it) and is then made whole by a reconcile
    let start = etcd
    let ops = deltaWrites(delta, ctx)
    if (write % reconcileEvery === 0) {
      start = etcd.copy().apply(ops.slice(0, Math.floor(random() * ops.length)))
      ops = reconcileWrites(start.entries(), full, ctx)
    }
    for (let k = 0; k <= ops.length; k++) {
      const found = unsafe(decodeState(layout, start.copy().apply(ops.slice(0, k)).entries()), committed, running, now)
      if (found !== null) return `write ${write}, after ${k} of ${ops.length} operations: ${found}`
    }
    etcd = start.apply(ops)
    running.released()
    if (JSON.stringify(decodeState(layout, etcd.entries())) !== JSON.stringify(full)) return `write ${write}: the load differs from the snapshot`
  }
  return null
}

/** One random operation; returns a generation a node reported (never going back, as a real node's). */
function step(c: Controller, now: number, pick: <T>(items: readonly T[]) => T, random: () => number, reports: Map<string, number>): { nodeId: string; generation: number } | null {
  const nodeId = pick(NAMES)
  const roll = random()
  let report: { nodeId: string; generation: number } | null = null
  try {
    if (roll < 0.5) {
      const last = reports.get(nodeId) ?? 0
      const reported = random() < 0.3 ? undefined : random() < 0.6 ? c.generation : last + Math.floor(random() * (c.generation - last + 1))
      c.register(now, body(nodeId, 2 + Math.floor(random() * 10), { generation: reported }), cert(`${NAMES.indexOf(nodeId)}`))
      if (reported !== undefined) reports.set(nodeId, reported)
      if (reported !== undefined) report = { nodeId, generation: reported }
    } else if (roll < 0.65) c.setDraining(now, nodeId, random() < 0.4)
    else if (roll < 0.7) c.removeRevoked(now, (serial) => serial === String(NAMES.indexOf(nodeId)))
    else c.claimIdentify(now, { node_id: c.ownerOf(Math.floor(random() * SETTINGS.totalShards)) ?? nodeId, shard_id: Math.floor(random() * SETTINGS.totalShards) })
  } catch (error) {
    if ((error as { code?: string }).code !== 'not_owner') throw error
  }
  return report
}

t.test('every prefix of every write is a safe state to take over from; the whole write loads as the snapshot', async (t) => {
  let failures = 0
  for (let seed = 1; seed <= 60 && failures < 3; seed++) {
    const found = history(seed, seed % 2 === 0 ? 4 : 1000)
    if (found !== null) {
      failures += 1
      t.fail(`seed ${seed}: ${found}`)
    }
  }
  t.equal(failures, 0, '60 histories of 25 writes, half of them with torn writes reconciled')
})

t.test('a write that releases and replaces a handoff in one change keeps the old entry until the meta lands', async (t) => {
  let n = 0
  const ctx: WriteContext = { layout, grantId: () => `9.${++n}` }
  const ops = deltaWrites(
    {
      meta: { generation: 3, totalShards: 24, maxConcurrency: 4, planFingerprint: '0'.repeat(64), reshard: null, crlNumber: null },
      putNodes: [],
      deleteNodes: [],
      putDraining: [],
      deleteDraining: [],
      putHandoffs: [[5, 1, 'b', 3]],
      deleteHandoffs: [[6, 1]],
      addGrants: [T0],
      dropGrantsBefore: T0 - 1000,
    },
    ctx,
  )
  t.same(
    ops.map((op) => `${op.type} ${'key' in op ? op.key : op.prefix}`),
    [
      'put /pxe/state/grant/0001700000000000/9.1',
      'put /pxe/state/handoff/00005/0000000000000003',
      'put /pxe/state/meta',
      'delete_range /pxe/state/handoff/00005/',
      'delete_prefix /pxe/state/handoff/00006/',
      'delete_range /pxe/state/grant/',
    ],
    'additions, records, meta, releases, expired grants',
  )
  t.match(ops[3], { rangeEnd: '/pxe/state/handoff/00005/0000000000000003' }, 'only the older entries of shard 5 go')
})
