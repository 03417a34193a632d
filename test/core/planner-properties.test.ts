import t from 'tap'
import { compareBytes } from '../../src/core/planner.js'
import { planShards, type PlannerNode, type ShardPlan } from '../support/planner-by-name.js'
import { seededRandom } from './fixtures.js'

// Mixed case, digits and punctuation, so that byte order and locale order disagree.
const ALPHABET = 'aAbBzZ09-_.'
const CASES = 10_000
// Only to show that the drawn IDs sort differently under a locale; the product never uses one.
const localeOrder = new Intl.Collator('en').compare

function drawNodes(random: () => number): PlannerNode[] {
  // Mostly small N keeps 10,000 cases fast; every 100th case is large.
  const count = random() < 0.01 ? 1 + Math.floor(random() * 300) : Math.floor(random() * 9)
  const nodes = new Map<string, PlannerNode>()
  while (nodes.size < count) {
    let nodeId = ALPHABET[Math.floor(random() * 8)]! // letters or digits first (the name rule)
    const length = Math.floor(random() * 6)
    for (let i = 0; i < length; i++) nodeId += ALPHABET[Math.floor(random() * ALPHABET.length)]!
    nodes.set(nodeId, { nodeId, capacity: 1 + Math.floor(random() * 128), draining: random() < 0.2 })
  }
  return [...nodes.values()]
}

function drawShards(random: () => number): number {
  const scale = random()
  if (scale < 0.05) return 65536
  if (scale < 0.5) return 1 + Math.floor(random() * 64)
  return 1 + Math.floor(random() * 65536)
}

function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}

/** Every invariant of issue 2 for one plan; returns the first broken one, or null. */
function brokenInvariant(shards: number, nodes: readonly PlannerNode[], plan: ShardPlan): string | null {
  const sortedIds = nodes.map((n) => n.nodeId).sort(compareBytes)
  if (JSON.stringify([...plan.ranges.keys()]) !== JSON.stringify(sortedIds)) return 'ranges not in byte order'
  const capacity = nodes.reduce((sum, n) => sum + (n.draining ? 0 : n.capacity), 0)
  if (plan.assigned !== Math.min(shards, capacity)) return 'assigned != min(S, capacity)'
  if (plan.assigned + plan.unassigned !== shards) return 'assigned + unassigned != S'
  let cursor = 0
  for (const node of [...nodes].sort((a, b) => compareBytes(a.nodeId, b.nodeId))) {
    const range = plan.ranges.get(node.nodeId)!
    if (range.rangeStart !== cursor) return `range of ${node.nodeId} not contiguous`
    if (range.rangeCount > node.capacity) return `${node.nodeId} above capacity`
    if (node.draining && range.rangeCount !== 0) return `draining ${node.nodeId} owns shards`
    cursor += range.rangeCount
  }
  // Contiguous ranges from 0 that end at `assigned` <= S: every shard owned at most once.
  if (cursor !== plan.assigned || cursor > shards) return 'a shard owned twice or out of range'
  return null
}

t.test(`planner invariants over ${CASES} seeded random inputs`, async (t) => {
  const random = seededRandom(0x5eed)
  let failures = 0
  let localeDiffers = 0
  for (let i = 0; i < CASES && failures < 5; i++) {
    const shards = drawShards(random)
    const nodes = drawNodes(random)
    const plan = planShards(shards, nodes)
    const broken = brokenInvariant(shards, nodes, plan)
    const again = planShards(shards, shuffled(nodes, random))
    const sameForShuffle = JSON.stringify([...again.ranges]) === JSON.stringify([...plan.ranges])
    if (broken !== null || !sameForShuffle) {
      failures += 1
      t.fail(`case ${i}: ${broken ?? 'input order changed the plan'}`, { shards, nodes })
    }
    const ids = nodes.map((n) => n.nodeId)
    const byLocale = [...ids].sort(localeOrder)
    if (JSON.stringify(byLocale) !== JSON.stringify([...ids].sort(compareBytes))) localeDiffers += 1
  }
  t.equal(failures, 0, 'every case holds every invariant')
  t.ok(localeDiffers > CASES / 4, `locale order differs from byte order in ${localeDiffers} cases`)
})
