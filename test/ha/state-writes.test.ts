// The etcd state store's write order, without etcd: random controller histories are written as the store
// writes them (deltaPhases, reconcileWrites), and a leader taking over after ANY prefix of a write's
// operations, or after every earlier phase and ANY subset of one phase (the transactions of a phase are
// sent together, so they may land in any order), is checked for safety: it loads (decodeState), restores a Controller exactly as after a
// restart, and must never let a shard be identified by a new owner while a node that may still run it
// has not confirmed stopping; the generation never goes back; no counted grant is lost. After the whole
// write, the load equals the controller's snapshot. Some histories start from a state in the per-shard
// handoff layout of earlier releases (an upgrade: the new term's reconcile turns it into runs). Etcd's
// key-value semantics (put, delete, range delete in byte order) are modelled by a sorted map here;
// etcd-state-store.test.ts runs the real thing.
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import type { DurableState } from '../../src/core/durable-state.js'
import { DAILY_WINDOW_MS } from '../../src/core/identify.js'
import type { ControllerSettings } from '../../src/core/types.js'
import type { EtcdKeyValue } from '../../src/ha/etcd-api.js'
import type { WriteOp } from '../../src/ha/etcd-limits.js'
import { HandoffRunIndex } from '../../src/ha/handoff-runs.js'
import { decodeState } from '../../src/ha/state-decode.js'
import { encodeHandoff, StateLayout } from '../../src/ha/state-layout.js'
import { deltaPhases, deltaWrites, reconcileWrites, type WriteContext, type WritePhases } from '../../src/ha/state-writes.js'
import { body, cert, claimAnswered, seededRandom, T0 } from '../core/fixtures.js'

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
  /** The same state with its handoffs as earlier releases stored them: one key per shard. */
  legacy(): KeySpace {
    const next = new KeySpace()
    for (const [k, v] of this.kv) {
      if (layout.parse(k)?.kind !== 'handoff_run') next.kv.set(k, v)
      else {
        const run = JSON.parse(v) as { first: number; count: number; fromNode: string; generation: number }
        for (let shardId = run.first; shardId < run.first + run.count; shardId++) {
          next.kv.set(layout.legacyHandoff(shardId, run.generation), encodeHandoff({ shardId, fromNode: run.fromNode, generation: run.generation }))
        }
      }
    }
    return next
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
    const claim = after.claimIdentify(now, { node_id: owner, shard_id: shardId }, after.certSerialOf(owner) ?? "")
    if (!(claim.granted === false && claim.reason === 'handoff_pending')) return `shard ${shardId}: ${owner} is not held back while ${others.join(', ')} may run it`
  }
  return null
}

/**
 * What etcd may hold when a write whose transactions of one phase go together is cut: every phase
 * before a random one, and a random subset of that one's operations.
 */
function tornPhases(phases: WritePhases, random: () => number): WriteOp[] {
  const k = Math.floor(random() * phases.length)
  return [...phases.slice(0, k).flat(), ...phases[k]!.filter(() => random() < 0.5)]
}

/** How many states a subset of one phase gave that no prefix gives (the subsets test something). */
let subsetStates = 0

/** How many histories were upgraded from the per-shard layout (a history without handoffs has nothing to upgrade). */
let upgrades = 0

/**
 * Runs one random history; returns the first problem found, or null. Every `reconcileEvery` writes one
 * fails half-way and the next reconciles; at the first write from `legacyAt` on with handoffs in etcd, it is turned into the per-shard layout
 * of earlier releases (a leader of the previous release wrote it) and a new term reconciles.
 */
function history(seed: number, reconcileEvery: number, legacyAt = 0): string | null {
  const random = seededRandom(seed)
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!
  let n = 0
  const ctx: WriteContext = { layout, grantId: () => `7.${++n}` }
  const c = new Controller(SETTINGS)
  const reports = new Map<string, number>()
  const running = new Running()
  let etcd = new KeySpace()
  let runs = new HandoffRunIndex(layout)
  let legacyKeys = 0
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
    let ops: WriteOp[]
    let phases: WritePhases
    if (legacyAt > 0 && write >= legacyAt && legacyKeys === 0 && etcd.entries().some((kv) => layout.parse(kv.key)?.kind === 'handoff_run')) {
      start = etcd.legacy()
      legacyKeys = [...start.kv.keys()].filter((k) => layout.parse(k)?.kind === 'handoff').length
      upgrades += 1
      if (JSON.stringify(decodeState(layout, start.entries())) !== JSON.stringify(committed)) return `write ${write}: the per-shard layout loads otherwise`
      ;({ phases, runs } = reconcileWrites(start.entries(), full, ctx))
      ops = phases.flat()
    } else {
      phases = deltaPhases(delta, ctx, runs)
      ops = phases.flat()
      if (write % reconcileEvery === 0) {
        start = etcd.copy().apply(random() < 0.5 ? ops.slice(0, Math.floor(random() * ops.length)) : tornPhases(phases, random))
        ;({ phases, runs } = reconcileWrites(start.entries(), full, ctx))
        ops = phases.flat()
      }
    }
    const prefixes = new Set<string>()
    for (let k = 0; k <= ops.length; k++) {
      const state = start.copy().apply(ops.slice(0, k))
      prefixes.add(JSON.stringify(state.entries().map((kv) => [kv.key, kv.value.toString()])))
      const found = unsafe(decodeState(layout, state.entries()), committed, running, now)
      if (found !== null) return `write ${write}, after ${k} of ${ops.length} operations: ${found}`
    }
    for (const [k, phase] of phases.entries()) {
      for (let tries = 0; tries < (phase.length > 1 ? 6 : 0); tries++) {
        const subset = phase.filter(() => random() < 0.5)
        const state = start.copy().apply([...phases.slice(0, k).flat(), ...subset])
        if (!prefixes.has(JSON.stringify(state.entries().map((kv) => [kv.key, kv.value.toString()])))) subsetStates += 1
        const found = unsafe(decodeState(layout, state.entries()), committed, running, now)
        if (found !== null) return `write ${write}, after the phases before ${k} and ${subset.length} of that phase's ${phase.length} operations: ${found}`
      }
    }
    etcd = start.apply(ops)
    running.released()
    if (JSON.stringify(decodeState(layout, etcd.entries())) !== JSON.stringify(full)) return `write ${write}: the load differs from the snapshot`
    const stored = etcd.entries().filter((kv) => layout.parse(kv.key)?.kind === 'handoff_run')
    if (JSON.stringify(stored.map((kv) => kv.key)) !== JSON.stringify(runs.list().map((r) => r.key))) return `write ${write}: the store's index of handoff runs is not what etcd holds`
    if (etcd.entries().some((kv) => layout.parse(kv.key)?.kind === 'handoff')) return `write ${write}: a per-shard handoff key is left`
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
    } else if (roll < 0.65) c.setDraining(now, nodeId, random() < 0.4, true)
    else if (roll < 0.7) c.removeRevoked(now, (serial) => serial === String(NAMES.indexOf(nodeId)))
    else claimAnswered(c, now, { node_id: c.ownerOf(Math.floor(random() * SETTINGS.totalShards)) ?? nodeId, shard_id: Math.floor(random() * SETTINGS.totalShards) })
  } catch (error) {
    if ((error as { code?: string }).code !== 'not_owner') throw error
  }
  return report
}

t.test('every prefix of every write is a safe state to take over from; the whole write loads as the snapshot', async (t) => {
  let failures = 0
  for (let seed = 1; seed <= 60 && failures < 3; seed++) {
    const found = history(seed, seed % 2 === 0 ? 4 : 1000, seed % 3 === 0 ? 12 : 0)
    if (found !== null) {
      failures += 1
      t.fail(`seed ${seed}: ${found}`)
    }
  }
  t.equal(failures, 0, '60 histories of 25 writes, half of them with torn writes reconciled, a third upgraded from per-shard handoff keys')
  t.ok(subsetStates >= 100, `${subsetStates} states from a subset of one phase that no prefix gives were checked too`)
  t.ok(upgrades >= 10, `${upgrades} of 20 histories were upgraded from per-shard handoff keys`)
})

const META = { generation: 3, totalShards: 24, maxConcurrency: 4, planFingerprint: '0'.repeat(64), reshard: null, crlNumber: null }
const NO_CHANGE = { putNodes: [], deleteNodes: [], putDraining: [], deleteDraining: [], addGrants: [], dropGrantsBefore: null }
const described = (ops: readonly WriteOp[]) => ops.map((op) => `${op.type} ${'key' in op ? op.key : op.prefix}`)

t.test('a write that partly releases and supersedes a run keeps the run until the meta lands; the pieces come first', async (t) => {
  let n = 0
  const ctx: WriteContext = { layout, grantId: () => `9.${++n}` }
  const runs = new HandoffRunIndex(layout)
  runs.adopt({ key: layout.handoffRun(4, 4, 2), first: 4, count: 4, fromNode: 'a', generation: 2 }) // shards 4-7 wait for a
  const ops = deltaWrites(
    { ...NO_CHANGE, meta: META, putHandoffs: [[5, 1, 'b', 3]], deleteHandoffs: [[6, 1]], addGrants: [T0], dropGrantsBefore: T0 - 1000 },
    ctx,
    runs,
  )
  t.same(
    described(ops),
    [
      'put /pxe/state/grant/0001700000000000/9.1',
      'put /pxe/state/handoff-run/00004/00001/0000000000000002',
      'put /pxe/state/handoff-run/00005/00001/0000000000000003',
      'put /pxe/state/handoff-run/00007/00001/0000000000000002',
      'put /pxe/state/meta',
      'delete /pxe/state/handoff-run/00004/00004/0000000000000002',
      'delete_range /pxe/state/grant/',
    ],
    'additions (the pieces of the run that remain, the new run), records, meta, the old run, expired grants',
  )
  t.same(
    runs.list().map((r) => [r.first, r.count, r.fromNode, r.generation]),
    [
      [4, 1, 'a', 2],
      [5, 1, 'b', 3],
      [7, 1, 'a', 2],
    ],
    'the index holds what etcd will hold',
  )
  // every prefix loads shard 5 as waiting (for a until the meta lands, then for b) and 4 and 7 for a
  const space = new KeySpace()
  space.kv.set(layout.handoffRun(4, 4, 2), JSON.stringify({ first: 4, count: 4, fromNode: 'a', generation: 2 }))
  space.kv.set(layout.meta(), JSON.stringify({ version: 2, meta: { ...META, generation: 2 } }))
  for (let k = 0; k <= ops.length; k++) {
    const loaded = decodeState(layout, space.copy().apply(ops.slice(0, k)).entries())!
    const waiting = Object.fromEntries(loaded.handoffs.map((h) => [h.shardId, h.fromNode]))
    const metaLanded = k > 4
    t.same(waiting, metaLanded ? (k > 5 ? { 4: 'a', 5: 'b', 7: 'a' } : { 4: 'a', 5: 'b', 6: 'a', 7: 'a' }) : { 4: 'a', 5: 'a', 6: 'a', 7: 'a' }, `after ${k} operations`)
  }
})

t.test('a re-plan that moves shards in runs writes a key per run, not per shard', async (t) => {
  let n = 0
  const ctx: WriteContext = { layout, grantId: () => `8.${++n}` }
  const settings = { ...SETTINGS, totalShards: 4096, dailyIdentifyLimit: null }
  const c = new Controller(settings)
  for (let i = 0; i < 40; i++) c.register(T0, body(`node-${i}`, 128), cert(`s${i}`))
  c.settle()
  const runs = new HandoffRunIndex(layout)
  runs.change([], []) // a fresh term's index of an empty prefix
  deltaWrites(c.takeDelta(), ctx, runs)
  c.setDraining(T0 + 1, 'node-0', true, true) // every range shifts: a run from each live node
  c.settle()
  const delta = c.takeDelta()
  const moved = delta.putHandoffs.reduce((sum, [, count]) => sum + count, 0)
  const ops = deltaWrites(delta, ctx, runs)
  const handoffPuts = ops.filter((op) => op.type === 'put' && layout.parse(op.key)?.kind === 'handoff_run')
  t.ok(moved > 1000, `${moved} shards wait for their previous owners`)
  t.equal(handoffPuts.length, delta.putHandoffs.length, `${handoffPuts.length} handoff keys: one per run`)
  t.ok(handoffPuts.length <= 2 * 40, 'at most about one run per node')
  t.equal(ops.length, handoffPuts.length + 2, 'and the drained node’s flag and the meta')
})

t.test('a handoff state that is not ours is refused, naming the key', async (t) => {
  const space = new KeySpace()
  space.kv.set(layout.meta(), JSON.stringify({ version: 2, meta: META }))
  space.kv.set(layout.handoffRun(0, 4, 2), JSON.stringify({ first: 0, count: 4, fromNode: 'a', generation: 2 }))
  t.equal(decodeState(layout, space.entries())!.handoffs.length, 4, 'a run of four')
  const bad = (key: string, value: string, message: RegExp, name: string) => {
    const next = space.copy()
    next.kv.set(key, value)
    t.throws(() => decodeState(layout, next.entries()), message, name)
  }
  bad(layout.handoffRun(2, 2, 2), JSON.stringify({ first: 2, count: 2, fromNode: 'b', generation: 2 }), /handoff-run\/00002\/00002\/0000000000000002 says shard 2 waits for b since generation 2, another entry says a/, 'two entries of one shard and generation that disagree')
  bad(layout.handoffRun(8, 2, 2), JSON.stringify({ first: 8, count: 3, fromNode: 'b', generation: 2 }), /holds the handoffs of shards 8 \(3\) at generation 2/, 'a value that is not its key')
  bad(layout.handoffRun(8, 2, 2), JSON.stringify({ first: 8, count: 2, fromNode: 'b', generation: 2, extra: 1 }), /is not a valid handoff run/, 'an unknown field')
  bad(layout.handoffRun(8, 2, 2), JSON.stringify({ first: 8, count: 2, fromNode: '../x', generation: 2 }), /is not a valid handoff run: fromNode/, 'a bad node name')
  bad(`${layout.root}handoff-run/00008/00000/0000000000000002`, JSON.stringify({ first: 8, count: 0, fromNode: 'b', generation: 2 }), /is not a valid handoff run: count/, 'a run of no shards')
  bad(layout.legacyHandoff(9, 2), JSON.stringify({ shardId: 8, fromNode: 'b', generation: 2 }), /holds the handoff of shard 8 at generation 2/, 'a per-shard entry under another shard')
  const older = space.copy()
  older.kv.set(layout.legacyHandoff(1, 1), encodeHandoff({ shardId: 1, fromNode: 'z', generation: 1 }))
  older.kv.set(layout.handoffRun(3, 1, 3), JSON.stringify({ first: 3, count: 1, fromNode: 'z', generation: 4 }))
  t.throws(() => decodeState(layout, older.entries()), /holds the handoffs of shards 3 \(1\) at generation 4/)
  older.kv.set(layout.handoffRun(3, 1, 4), JSON.stringify({ first: 3, count: 1, fromNode: 'z', generation: 4 }))
  older.kv.delete(layout.handoffRun(3, 1, 3))
  t.same(
    decodeState(layout, older.entries())!.handoffs.map((h) => [h.shardId, h.fromNode, h.generation]),
    [
      [0, 'a', 2],
      [1, 'a', 2],
      [2, 'a', 2],
      [3, 'a', 2],
    ],
    'an older per-shard entry is superseded by the newer run; an entry newer than the meta is not yet in force',
  )
})

t.test('a reconcile puts back a torn write’s runs without deleting them first; an unreadable run goes after what replaces it', async (t) => {
  let n = 0
  const ctx: WriteContext = { layout, grantId: () => `6.${++n}` }
  const runOf = (first: number, count: number, fromNode: string, generation: number) => JSON.stringify({ first, count, fromNode, generation })
  // etcd: the meta of generation 2; a write of generation 3 that tore after its first transaction left
  // runs of generation 3 (invisible to a load) behind; two unreadable runs of generation 2.
  const space = new KeySpace()
  space.kv.set(layout.meta(), JSON.stringify({ version: 2, meta: { ...META, generation: 2 } }))
  space.kv.set(layout.handoffRun(0, 4, 3), runOf(0, 4, 'a', 3))
  space.kv.set(layout.handoffRun(8, 2, 3), runOf(8, 2, 'a', 3)) // not in the state any more
  space.kv.set(layout.handoffRun(12, 2, 2), '{"first": 12') // unreadable, and wanted again
  space.kv.set(layout.handoffRun(16, 2, 2), 'not json') // unreadable, not wanted
  const handoffs = [0, 1, 2, 3].map((shardId) => ({ shardId, fromNode: 'a', generation: 3 })).concat([12, 13].map((shardId) => ({ shardId, fromNode: 'b', generation: 2 })))
  const full: DurableState = { version: 2, meta: { ...META, generation: 3 }, nodes: [], draining: [], handoffs, dailyGrants: [] }
  const ops = reconcileWrites(space.entries(), full, ctx).phases.flat()
  t.same(
    described(ops),
    [
      `delete ${layout.handoffRun(8, 2, 3)}`,
      `put ${layout.handoffRun(0, 4, 3)}`,
      `put ${layout.handoffRun(12, 2, 2)}`,
      `put ${layout.meta()}`,
      `delete ${layout.handoffRun(16, 2, 2)}`,
    ],
    'the invisible run not wanted goes first; wanted runs are put over what is there, never deleted; the unreadable one last',
  )
  for (let k = 0; k < ops.length; k++) {
    // Until the unreadable run is gone a load refuses the state: no leader starts from such a prefix.
    t.throws(() => decodeState(layout, space.copy().apply(ops.slice(0, k)).entries()), /is unusable: key \/pxe\/state\/handoff-run\/000(12|16)\//, `after ${k} operations the load still refuses`)
  }
  t.same(decodeState(layout, space.copy().apply(ops).entries()), full, 'the whole reconcile loads as the state')
})

t.test('a reconcile that wants a stored run’s key again with another previous owner puts it over the run, never deletes it', async (t) => {
  let n = 0
  const ctx: WriteContext = { layout, grantId: () => `5.${++n}` }
  const space = new KeySpace()
  space.kv.set(layout.meta(), JSON.stringify({ version: 2, meta: { ...META, generation: 3 } }))
  space.kv.set(layout.handoffRun(4, 3, 3), JSON.stringify({ first: 4, count: 3, fromNode: 'a', generation: 3 }))
  const handoffs = [4, 5, 6].map((shardId) => ({ shardId, fromNode: 'c-1', generation: 3 }))
  const full: DurableState = { version: 2, meta: { ...META, generation: 3 }, nodes: [], draining: [], handoffs, dailyGrants: [] }
  const ops = reconcileWrites(space.entries(), full, ctx).phases.flat()
  t.same(described(ops), [`put ${layout.handoffRun(4, 3, 3)}`], 'one put under the same key, no delete after it')
  t.same(decodeState(layout, space.copy().apply(ops).entries())?.handoffs, handoffs, 'the load holds the new previous owner')
})
