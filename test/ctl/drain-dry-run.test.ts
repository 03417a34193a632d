// pxe-ctl drain --dry-run against a real controller under both planners: what it predicts (shards
// moved, per new owner, to no node) is what the real drain then does, and the dry run changes nothing.
import t from 'tap'
import { startFleet, type Fleet } from './support.js'

/** Owner per shard of a GET /v1/plan answer. */
function owners(plan: any): (string | null)[] {
  const out: (string | null)[] = new Array(plan.total_shards).fill(null)
  for (const n of plan.nodes) for (let s = n.range_start; s < n.range_start + n.range_count; s++) out[s] = n.node_id
  return out
}

/** What really moved between two plans: count, and per new owner. */
function moves(before: any, after: any): { moved: number; to: Record<string, number>; to_unassigned: number } {
  const a = owners(before)
  const b = owners(after)
  const to: Record<string, number> = {}
  let moved = 0
  let toUnassigned = 0
  a.forEach((owner, s) => {
    if (owner === null || owner === b[s]) return
    moved += 1
    if (b[s] !== null) to[b[s]!] = (to[b[s]!] ?? 0) + 1
    else toUnassigned += 1
  })
  return { moved, to, to_unassigned: toUnassigned }
}

async function checkInAll(fleet: Fleet, caps: Record<string, number>): Promise<void> {
  for (const [name, capacity] of Object.entries(caps)) await fleet.checkIn(name, { capacity })
  const generation = (await fleet.plan()).generation
  for (const [name, capacity] of Object.entries(caps)) await fleet.checkIn(name, { capacity, generation })
}

for (const planner of ['contiguous', 'stable'] as const) {
  t.test(`drain --dry-run predicts what the real drain moves (${planner} planner) and changes nothing`, async (t) => {
    const fleet = await startFleet(t, { planner, total_shards: 60, max_concurrency: 1 })
    // A history, so that the stable planner's ranges are not the contiguous layout.
    await checkInAll(fleet, { b: 24, d: 16 })
    await checkInAll(fleet, { a: 16, b: 24, c: 8, d: 16, e: 12 })
    for (const target of ['b', 'd']) {
      const before = await fleet.plan()
      const dry = await fleet.ctl('drain', target, '--dry-run', '-o', 'json')
      t.equal(dry.code, 0, dry.stderr)
      const predicted = JSON.parse(dry.stdout)
      t.equal((await fleet.plan()).generation, before.generation, 'the dry run changed nothing')
      t.equal(predicted.node_id, target)
      t.equal(predicted.planner, planner, 'the planner the plan names')
      t.equal(predicted.planner_reported, true)
      const text = await fleet.ctl('drain', target, '--dry-run')
      t.equal(text.code, 0, text.stderr)
      // b's drain leaves 8 shards without a node (52 capacity for 60 shards), d's 16 more (b stays drained):
      // pxe-ctl refuses them without --force
      t.equal(predicted.stranded, target === 'b' ? 8 : 16, `${target}: shards the drain would leave without a node`)
      if (predicted.stranded > 0) {
        const refused = await fleet.ctl('drain', target)
        t.equal(refused.code, 1, `${target}: refused without --force`)
        t.equal((await fleet.plan()).generation, before.generation, `${target}: the refusal changed nothing`)
      }
      const real = await fleet.ctl('drain', target, ...(predicted.stranded > 0 ? ['--force'] : []))
      t.equal(real.code, 0, real.stderr)
      const drained = await fleet.plan()
      t.equal(drained.unassigned, predicted.unassigned_after, `${target}: predicted unassigned = the controller's`)
      t.equal(predicted.unassigned_now, before.unassigned)
      t.equal(predicted.stranded, drained.unassigned - before.unassigned)
      const actual = moves(before, drained)
      t.ok(actual.moved > 0, `${target}: shards moved`)
      t.same({ moved: predicted.moved, to: predicted.to, to_unassigned: predicted.to_unassigned }, actual, `${target}: predicted = what the controller did`)
      const targets = Object.entries(actual.to).sort(([x], [y]) => (x < y ? -1 : 1))
      const unassigned = actual.to_unassigned > 0 ? [`${actual.to_unassigned} to no node (unassigned: no capacity left)`] : []
      t.equal(text.stdout.split('\n')[0], `${actual.moved} shards would move: ${[...targets.map(([n, k]) => `${k} to ${n}`), ...unassigned].join(', ')}`)
      t.equal(
        text.stdout.split('\n')[1],
        `${drained.unassigned} of 60 shards would be left without a node${before.unassigned > 0 ? ` (${before.unassigned} now)` : ''}: the other live nodes lack the capacity; the drain needs --force`,
      )
      await checkInAll(fleet, { a: 16, b: 24, c: 8, d: 16, e: 12 })
    }
    const again = await fleet.ctl('drain', 'b', '--dry-run')
    t.match(again.stdout, /^0 shards would move/, 'a node already draining: nothing moves')
    t.match(again.stdout, /^24 of 60 shards would be left without a node, as now \(no more than before the drain\)$/m)
  })
}
