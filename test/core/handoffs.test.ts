// The handoff ledger against a plain model: random records, clears and releases (by generation, and of
// a whole node) must leave exactly the entries the model keeps, with the same counts released. The
// ledger finds a node's shards through its own per-node lists, which go stale as shards move on.
import t from 'tap'
import { HandoffLedger } from '../../src/core/handoffs.js'
import { NodeIndex } from '../../src/core/node-index.js'

/** A small deterministic generator (the test must be repeatable). */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1
  return () => {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return (x >>> 0) / 2 ** 32
  }
}

for (const seed of [1, 2, 3, 42, 1234]) {
  t.test(`seed ${seed}: the ledger matches the model after 20,000 random operations`, async (t) => {
    const S = 64
    const nodes = new NodeIndex()
    const names = Array.from({ length: 6 }, (_, i) => `n${i}`)
    const ids = names.map((n) => nodes.idOf(n))
    const changed = new Set<number>()
    const ledger = new HandoffLedger(S, nodes, (shardId) => changed.add(shardId))
    const model = new Map<number, { from: number; generation: number }>()
    const random = rng(seed)
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!
    let generation = 1
    let mismatches = 0
    for (let step = 0; step < 20_000; step++) {
      const op = random()
      const shardId = Math.floor(random() * S)
      const from = pick(ids)
      if (op < 0.45) {
        if (model.has(shardId)) continue // record needs a free slot
        if (random() < 0.2) generation += 1
        ledger.record(shardId, from, generation)
        model.set(shardId, { from, generation })
      } else if (op < 0.65) {
        ledger.clear(shardId)
        model.delete(shardId)
      } else if (op < 0.95) {
        const upTo = generation - Math.floor(random() * 3)
        let expected = 0
        for (const [s, e] of model) if (e.from === from && e.generation <= upTo) (model.delete(s), (expected += 1))
        if (ledger.releaseAcknowledged(from, upTo) !== expected) mismatches += 1
      } else {
        let expected = 0
        for (const [s, e] of model) if (e.from === from) (model.delete(s), (expected += 1))
        if (ledger.releaseNode(from) !== expected) mismatches += 1
      }
    }
    t.equal(mismatches, 0, 'every release released what the model released')
    const actual = ledger.entries().map((e) => [e.shardId, e.fromNode, e.generation])
    const expected = [...model].sort((a, b) => a[0] - b[0]).map(([s, e]) => [s, nodes.nameOf(e.from), e.generation])
    t.same(actual, expected, 'the same pending handoffs remain')
    t.ok(changed.size > 0, 'changes were reported for persistence')
  })
}
