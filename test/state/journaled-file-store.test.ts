// The embedded store: snapshot + journal. Writes append deltas; loads replay them; the journal is
// compacted into the snapshot once it grows; a torn last line is ignored and cut; other damage stops
// the load and changes nothing; a failed write makes the next one a whole snapshot.
import t from 'tap'
import { appendFileSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { DurableState, StateDelta } from '../../src/core/durable-state.js'
import { planFingerprint } from '../../src/core/plan-fingerprint.js'
import { applyDeltas } from '../../src/state/apply-delta.js'
import { JournaledFileStore } from '../../src/state/journaled-file-store.js'
import { encodeJournalLine } from '../../src/state/journal-format.js'
import { encodeStateFile } from '../../src/state/state-file-format.js'
import { StateFileError } from '../../src/state/state-file-error.js'
import { testDir } from '../support/test-dir.js'

const meta = (generation: number) => ({ generation, totalShards: 64, maxConcurrency: 16, planFingerprint: planFingerprint([]), reshard: null, crlNumber: null })
const node = (nodeId: string, reportedGeneration: number | null = null) => ({ nodeId, capacity: 8, reportedGeneration, certSerial: 'ab', certNotBefore: 0, readyShards: 0, startingShards: 0, backoffShards: 0, fatalShards: 0 })
const EMPTY: DurableState = { version: 2, meta: meta(0), nodes: [], draining: [], handoffs: [], dailyGrants: [] }
const delta = (generation: number, extra: Partial<StateDelta> = {}): StateDelta => ({
  meta: meta(generation), putNodes: [], deleteNodes: [], putDraining: [], deleteDraining: [], putHandoffs: [], deleteHandoffs: [], addGrants: [], dropGrantsBefore: null, ...extra,
})

/** Writes deltas through a store the way the controller does: `full` is the state after the delta. */
async function writeAll(store: JournaledFileStore, start: DurableState, deltas: StateDelta[]): Promise<DurableState> {
  let state = start
  for (const d of deltas) {
    state = applyDeltas(state, [d])
    const after = state
    await store.write(d, () => after)
  }
  return state
}

const someDeltas = (): StateDelta[] => [
  delta(1, { putNodes: [node('a'), node('b')] }),
  delta(2, { putHandoffs: [[3, 1, 'a', 2]], putDraining: ['ghost'], addGrants: [1000] }),
  delta(2, { putNodes: [node('a', 2)], deleteHandoffs: [[3, 1]] }),
  delta(3, { deleteNodes: ['b'], deleteDraining: ['ghost'], addGrants: [2000], dropGrantsBefore: 1500 }),
]

t.test('fresh, then appended changes, read back by a new store', async (t) => {
  const dir = testDir(t)
  const store = new JournaledFileStore(dir)
  t.equal(await store.load(), null, 'nothing yet')
  const expected = await writeAll(store, EMPTY, someDeltas())
  await store.close()
  t.ok(statSync(join(dir, 'state.json')).isFile(), 'the first write made the snapshot')
  t.equal(readFileSync(join(dir, 'state.journal'), 'utf8').trim().split('\n').length, 3, 'the later ones are journal lines')
  t.same(await new JournaledFileStore(dir).load(), expected)
  t.same(expected.nodes.map((n) => n.nodeId), ['a'])
  t.same(expected.dailyGrants, [2000])
})

t.test('compaction: the journal starts over once it outgrows its limit; nothing is lost', async (t) => {
  const dir = testDir(t)
  const store = new JournaledFileStore(dir, { minCompactBytes: 600 })
  await store.load()
  const many = Array.from({ length: 40 }, (_, i) => delta(i + 1, { putNodes: [node(`n${i % 7}`, i)] }))
  const expected = await writeAll(store, EMPTY, many)
  await store.close()
  t.ok(readFileSync(join(dir, 'state.journal')).length < 1400, 'the journal was compacted along the way')
  t.same(await new JournaledFileStore(dir).load(), expected)
  t.same(readdirSync(dir).filter((n) => n.includes('.tmp-')), [], 'no temp files left')
})

t.test('a torn last line (a crash mid-append) is ignored, then cut before the next append', async (t) => {
  const dir = testDir(t)
  const store = new JournaledFileStore(dir)
  await store.load()
  const state = await writeAll(store, EMPTY, someDeltas().slice(0, 2))
  await store.close()
  appendFileSync(join(dir, 'state.journal'), '{"seq":2,"sha256":"00') // no newline: torn
  const again = new JournaledFileStore(dir)
  t.same(await again.load(), state, 'the torn line is not applied')
  const next = await writeAll(again, state, [delta(9, { putNodes: [node('z')] })])
  await again.close()
  t.same(await new JournaledFileStore(dir).load(), next, 'the next line starts on a line boundary')
})

t.test('damage stops the load and changes nothing', async (t) => {
  const cases: Array<[string, (dir: string) => void, RegExp]> = [
    ['an edited line', (dir) => {
      const path = join(dir, 'state.journal')
      writeFileSync(path, readFileSync(path, 'utf8').replace('"generation":2', '"generation":7'))
    }, /checksum mismatch/],
    ['a missing line', (dir) => {
      const path = join(dir, 'state.journal')
      const lines = readFileSync(path, 'utf8').split('\n')
      writeFileSync(path, [lines[0], ...lines.slice(2)].join('\n'))
    }, /expected 2/],
    ['a journal without its state file', (dir) => rmSync(join(dir, 'state.json')), /journal exists but the state file does not/],
    ['garbage', (dir) => appendFileSync(join(dir, 'state.journal'), 'not json\n'), /not a journal line/],
  ]
  for (const [label, damage, message] of cases) {
    const dir = join(testDir(t), label.replace(/\W+/g, '-'))
    mkdirSync(dir)
    const store = new JournaledFileStore(dir)
    await store.load()
    await writeAll(store, EMPTY, someDeltas())
    await store.close()
    damage(dir)
    const before = Object.fromEntries(readdirSync(dir).map((n) => [n, readFileSync(join(dir, n), 'utf8')]))
    const loading = new JournaledFileStore(dir).load()
    await t.rejects(loading, StateFileError, `${label}: refused`)
    await loading.catch((err: Error) => t.match(err.message, message, `${label}: says why`))
    t.same(Object.fromEntries(readdirSync(dir).map((n) => [n, readFileSync(join(dir, n), 'utf8')])), before, `${label}: nothing changed`)
  }
})

t.test('a failed write: the next one writes the whole state', async (t) => {
  const dir = testDir(t)
  const store = new JournaledFileStore(dir)
  await store.load()
  let state = await writeAll(store, EMPTY, someDeltas().slice(0, 1))
  await store.close() // the journal file is opened again on the next append
  rmSync(join(dir, 'state.journal'))
  mkdirSync(join(dir, 'state.journal')) // appends now fail with EISDIR
  const lost = delta(5, { putNodes: [node('lost')] })
  state = applyDeltas(state, [lost])
  const failed = state
  await t.rejects(store.write(lost, () => failed), 'the append fails')
  rmSync(join(dir, 'state.journal'), { recursive: true })
  const next = delta(6, { putNodes: [node('next')] })
  state = applyDeltas(state, [next])
  const after = state
  await store.write(next, () => after)
  await store.close()
  const loaded = await new JournaledFileStore(dir).load()
  t.same(loaded, state, 'the change of the failed write is not lost')
  t.same(loaded?.nodes.map((n) => n.nodeId), ['a', 'b', 'lost', 'next'])
})

t.test('a version-1 state file of an earlier release loads as the same state', async (t) => {
  const dir = testDir(t)
  const v1 = {
    version: 1, generation: 4, totalShards: 64,
    nodes: [{ ...node('a', 4), rangeStart: 0, rangeCount: 8 }],
    draining: ['ghost'], handoffs: [], dailyGrants: [5], crlNumber: '12',
  }
  writeFileSync(join(dir, 'state.json'), encodeStateFile(v1), { mode: 0o600 })
  const loaded = await new JournaledFileStore(dir).load()
  t.match(loaded, { version: 2, meta: { generation: 4, totalShards: 64, maxConcurrency: null, crlNumber: '12', planFingerprint: planFingerprint([['a', { rangeStart: 0, rangeCount: 8 }]]) }, nodes: [node('a', 4)], draining: ['ghost'] })
})

t.test('handoffs are journalled as runs; lines of the earlier per-shard form still load', async (t) => {
  const dir = testDir(t)
  const store = new JournaledFileStore(dir)
  await store.load()
  const first = delta(1, { putNodes: [node('a'), node('b')] })
  await store.write(first, () => applyDeltas(EMPTY, [first]))
  // Shards 10-13 and 20 left a for b at generation 2, then 11-12 were released.
  const runs = [delta(2, { putHandoffs: [[10, 4, 'a', 2], [20, 1, 'a', 2]] }), delta(2, { deleteHandoffs: [[11, 2]] })]
  for (const d of runs) await store.write(d, () => t.fail('no compaction expected') as never)
  await store.close()
  const lines = readFileSync(join(dir, 'state.journal'), 'utf8').trim().split('\n')
  t.match(lines[0], /"putHandoffs":\[\[10,4,"a",2\],\[20,1,"a",2\]\]/, 'one run per contiguous range, not one object per shard')
  const loaded = await new JournaledFileStore(dir).load()
  t.same(loaded?.handoffs.map((h) => h.shardId), [10, 13, 20])
  t.same(loaded?.handoffs[0], { shardId: 10, fromNode: 'a', generation: 2 })

  // A line as releases before runs wrote it: one object per shard, bare shard IDs for releases.
  const legacy = { ...delta(3), putHandoffs: [{ shardId: 30, fromNode: 'b', generation: 3 }], deleteHandoffs: [10] }
  appendFileSync(join(dir, 'state.journal'), encodeJournalLine(3, legacy))
  const upgraded = await new JournaledFileStore(dir).load()
  t.same(upgraded?.handoffs, [
    { shardId: 13, fromNode: 'a', generation: 2 },
    { shardId: 20, fromNode: 'a', generation: 2 },
    { shardId: 30, fromNode: 'b', generation: 3 },
  ])
})

t.test('a run that reaches past shard 65535 is damage: the load stops', async (t) => {
  const dir = testDir(t)
  const store = new JournaledFileStore(dir)
  await store.load()
  const first = delta(1, { putNodes: [node('a')] })
  await store.write(first, () => applyDeltas(EMPTY, [first]))
  await store.close()
  appendFileSync(join(dir, 'state.journal'), encodeJournalLine(1, delta(2, { putHandoffs: [[65_530, 7, 'a', 2]] })))
  const before = readFileSync(join(dir, 'state.journal'))
  await t.rejects(new JournaledFileStore(dir).load(), { name: 'StateFileError', message: /journal line 1 is not a valid change: a run must end at shard 65535 or before/ })
  t.same(readFileSync(join(dir, 'state.journal')), before, 'nothing changed on disk')
})

t.test('a whole write (a clean stop) folds the journal, runs included, into a snapshot of per-shard records', async (t) => {
  const dir = testDir(t)
  const store = new JournaledFileStore(dir)
  await store.load()
  let state = EMPTY
  for (const d of [delta(1, { putNodes: [node('a'), node('b')] }), delta(2, { putHandoffs: [[4, 3, 'a', 2]] })]) {
    state = applyDeltas(state, [d])
    const after = state
    await store.write(d, () => after)
  }
  t.ok(readFileSync(join(dir, 'state.journal')).length > 0, 'the runs went into the journal')
  await store.write(delta(2), () => state, true)
  await store.close()
  t.equal(readFileSync(join(dir, 'state.journal')).length, 0, 'the journal is empty after the whole write')
  const body = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')).body
  t.same(body.handoffs, [4, 5, 6].map((shardId) => ({ shardId, fromNode: 'a', generation: 2 })), 'the snapshot holds one record per shard, as earlier releases read it')
})
