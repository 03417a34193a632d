// SPEC "REST budget", the controller's side: max-min fair shares of the bot's REST limits, and the
// invariant that the shares in force never sum above the safe budget, also while they change. The
// shares in force are tracked here from the answers alone (each answer replaces the node's share until its
// `until`), independently of the core's own accounting.
import t from 'tap'
import { Controller } from '../../src/core/controller.js'
import { spreadReserve, waterFill } from '../../src/core/rest-shares.js'
import type { CheckinBody } from '../../src/core/schemas.js'
import type { ControllerSettings, CheckinOutcome } from '../../src/core/types.js'
import { body, cert, checkIn, LEASE_MS, SETTINGS, seededRandom, T0 } from './fixtures.js'

const REST = { globalPerSecond: 50, safety: 0.9, invalidPer10Minutes: 10_000 }
const WITH_REST: ControllerSettings = { ...SETTINGS, rest: REST }
const BUDGET = 45
const INVALID = 9000

/** What each node was answered, as the node holds it: share and end. */
class Ledger {
  readonly held = new Map<string, { perSecond: number; invalidBudget: number; untilMs: number }>()

  /** A node's proxy holds what its answer says; an answer without `rest` means no share (the agent drops it). */
  answer(nodeId: string, out: CheckinOutcome): void {
    if (out.rest === null) this.held.delete(nodeId)
    else this.held.set(nodeId, out.rest)
  }

  sums(now: number): { perSecond: number; invalid: number } {
    let perSecond = 0
    let invalid = 0
    for (const share of this.held.values()) {
      if (share.untilMs <= now) continue
      perSecond += share.perSecond
      invalid += share.invalidBudget
    }
    return { perSecond: Math.round(perSecond * 100) / 100, invalid }
  }
}

const demand = (perSecond: number, invalid = 0): Partial<CheckinBody> => ({ rest_demand: { per_second: perSecond, invalid_10m: invalid } })

t.test('water-filling: never above a demand or the budget, and max-min fair', async (t) => {
  t.same(waterFill([10000, 500, 500, 500], 4500), [3000, 500, 500, 500], 'the SPEC scenario: 100/s against three 5/s')
  t.same(waterFill([100, 100, 100], 4500), [100, 100, 100], 'small demands are met whole; the rest stays unallocated')
  t.same(waterFill([9000, 9000], 4500), [2250, 2250], 'equal demands split evenly')
  t.same(waterFill([], 4500), [])
  t.same(spreadReserve([0, 0, 0], 9000), [2250, 2250, 2250], 'the invalid reserve is spread in n + 1 parts')
  const random = seededRandom(61)
  for (let run = 0; run < 500; run++) {
    const n = 1 + Math.floor(random() * 40)
    const demands = Array.from({ length: n }, () => Math.floor(random() * 3000))
    const budget = Math.floor(random() * 10_000)
    const shares = waterFill(demands, budget)
    const sum = shares.reduce((a, b) => a + b, 0)
    if (sum > budget) t.fail(`sum ${sum} above budget ${budget}`)
    for (let i = 0; i < n; i++) {
      if (shares[i]! > demands[i]!) t.fail('a share above its demand')
      // max-min: a node short of its demand has at least every other node's share (within rounding)
      if (shares[i]! < demands[i]!) for (const other of shares) if (other > shares[i]! + 1) t.fail(`unfair: ${shares[i]} short of ${demands[i]} while another has ${other}`)
    }
    const spread = spreadReserve(demands, budget)
    if (spread.reduce((a, b) => a + b, 0) > budget) t.fail('spread above budget')
  }
  t.pass('500 random demand sets')
})

t.test('4 nodes, one hungry: the hungry node gets what the others leave; a raise waits for lowered shares', async (t) => {
  const c = new Controller(WITH_REST)
  const ledger = new Ledger()
  let now = T0
  const at = (nodeId: string, perSecond: number) => {
    const out = checkIn(c, now, body(nodeId, 16, demand(perSecond)), cert(nodeId))
    ledger.answer(nodeId, out)
    const sums = ledger.sums(now)
    if (sums.perSecond > BUDGET || sums.invalid > INVALID) t.fail(`over budget at ${nodeId}: ${JSON.stringify(sums)}`)
    return out.rest!
  }
  t.equal(at('hungry', 100).perSecond, 45, 'alone: the whole safe budget')
  t.equal(at('small-1', 5).perSecond, 0, 'the budget is all in force: a newcomer waits for the lowered share')
  now += 1000
  t.equal(at('hungry', 100).perSecond, 40, 'lowered at its own check-in')
  t.equal(at('small-1', 5).perSecond, 5, 'then the newcomer gets its fair share')
  now += 1000
  at('small-2', 5)
  at('small-3', 5)
  now += 1000
  for (let round = 0; round < 3; round++) {
    now += 1000
    for (const [nodeId, perSecond] of [['hungry', 100], ['small-1', 5], ['small-2', 5], ['small-3', 5]] as const) at(nodeId, perSecond)
  }
  t.same(
    ['hungry', 'small-1', 'small-2', 'small-3'].map((n) => ledger.held.get(n)!.perSecond),
    [30, 5, 5, 5],
    'steady state: 30 for the hungry node, 5 each for the others (45 in all)',
  )
  const view = c.plan(now)
  t.same(view.rest, { globalPerSecond: 50, safety: 0.9, budgetPerSecond: 45, invalidBudget: 9000, allocatedPerSecond: 45, allocatedInvalid: ledger.sums(now).invalid, demandPerSecond: 115 })
  t.same(view.nodes.find((n) => n.nodeId === 'hungry')!.rest, { perSecond: 30, invalidBudget: 1800, demand: { perSecond: 100, invalid10m: 0 } }, 'the plan view shows share and demand')

  // small-3 leaves on purpose: its answer carries no share, and the budget it held is free at once
  const left = checkIn(c, now, body('small-3', 16, { leaving: true, ...demand(5) }), cert('small-3'))
  t.equal(left.rest!.perSecond, 0, 'a leaving node is answered with no share')
  ledger.answer('small-3', left)
  now += 1000
  t.equal(at('hungry', 100).perSecond, 35, 'the hungry node gets what the leaver left at its next check-in')
  // a newcomer joins: the hungry node is lowered first, the newcomer raised after
  t.equal(at('late', 5).perSecond, 0, 'the newcomer waits')
  now += 1000
  t.equal(at('hungry', 100).perSecond, 30)
  t.equal(at('late', 5).perSecond, 5)
})

t.test('floors, draining and demand that falls', async (t) => {
  const c = new Controller(WITH_REST)
  let now = T0
  t.equal(checkIn(c, now, body('quiet', 16, demand(0)), cert('quiet')).rest!.perSecond, 1, 'a node with no demand keeps the floor of 1/s')
  const older = checkIn(c, now, body('older', 16), cert('older'))
  t.equal(older.rest, null, 'a node that reports no rest_demand (no proxy, or an agent older than the budget) is answered no share at all')
  t.equal(c.plan(now).nodes.find((n) => n.nodeId === 'older')!.rest, null, 'and is shown outside the budget')
  t.equal(checkIn(c, now, body('tiny', 16, demand(0.2)), cert('tiny')).rest!.perSecond, 1, 'a demand below the floor gets the floor')
  t.equal(checkIn(c, now, body('busy', 16, demand(12.34)), cert('busy')).rest!.perSecond, 12.34, 'a fractional demand is met to the hundredth')
  c.setDraining(now, 'busy', true, true)
  now += 1000
  t.equal(checkIn(c, now, body('busy', 16, demand(12.34)), cert('busy')).rest!.perSecond, 1, 'a draining node keeps the floor only')
  t.same(c.plan(now).nodes.find((n) => n.nodeId === 'busy')!.rest!.demand, { perSecond: 12.34, invalid10m: 0 }, 'its demand is still shown')
  t.equal(c.plan(now).rest!.allocatedPerSecond, 3, 'three floors in force: quiet, tiny and the draining busy')
  now += 1000
  t.equal(checkIn(c, now, body('tiny', 16), cert('tiny')).rest, null, 'a node that stops reporting demand leaves the budget')
  t.equal(c.plan(now).rest!.allocatedPerSecond, 2, 'its share is free at once')
})

t.test('departures: an expired or revoked node keeps its share counted until its until', async (t) => {
  const c = new Controller(WITH_REST)
  const ledger = new Ledger()
  let now = T0
  ledger.answer('a', checkIn(c, now, body('a', 16, demand(100)), cert('a')))
  ledger.answer('b', checkIn(c, now, body('b', 16, demand(100)), cert('b')))
  t.equal(ledger.held.get('a')!.perSecond, 45)
  t.equal(ledger.held.get('b')!.perSecond, 0)
  t.same(c.removeRevoked(now + 10, (serial) => serial === 'a'), ['a'], 'a is revoked')
  now += 1000
  ledger.answer('b', checkIn(c, now, body('b', 16, demand(100)), cert('b')))
  t.equal(ledger.held.get('b')!.perSecond, 0, "the revoked node may still send until its share's until: nothing is free")
  now = ledger.held.get('a')!.untilMs
  ledger.answer('b', checkIn(c, now, body('b', 16, demand(100)), cert('b')))
  t.equal(ledger.held.get('b')!.perSecond, 45, 'from its until on, the budget is free')
  // expiry: b stops checking in; a newcomer gets nothing until b's lease (and share) ran out
  const bUntil = ledger.held.get('b')!.untilMs
  t.equal(checkIn(c, bUntil - 1, body('c', 16, demand(100)), cert('c')).rest!.perSecond, 0, 'before the silent node expired')
  t.equal(checkIn(c, bUntil + 1, body('c', 16, demand(100)), cert('c')).rest!.perSecond, 45, 'after')
})

t.test('after a restore the previous shares are unknown for a lease, less what the nodes report they hold', async (t) => {
  const c = new Controller(WITH_REST)
  let now = T0
  const out = ['a', 'b', 'c'].map((id) => checkIn(c, now, body(id, 16, demand(15)), cert(id)))
  t.same(out.map((o) => o.rest!.perSecond), [15, 15, 15])
  now += 500
  const restored = new Controller(WITH_REST, { state: c.snapshot(), now })
  const held = (perSecond: number, invalid: number): Partial<CheckinBody> => ({ rest_demand: { per_second: 15, invalid_10m: 0, held: { per_second: perSecond, invalid_budget: invalid } } })
  t.equal(checkIn(restored, now, body('a', 16, demand(15)), cert('a')).rest!.perSecond, 0, 'a node that reports nothing it holds gets nothing yet')
  checkIn(restored, now, body('b', 16, held(out[1]!.rest!.perSecond, out[1]!.rest!.invalidBudget)), cert('b'))
  checkIn(restored, now, body('c', 16, held(out[2]!.rest!.perSecond, out[2]!.rest!.invalidBudget)), cert('c'))
  now += 1000 // the fair targets follow reported demand within a second
  const b = checkIn(restored, now, body('b', 16, held(1, 0)), cert('b')).rest!
  t.equal(b.perSecond, 15, 'a node that reported its held share gets its fair share back within a lease')
  const c2 = checkIn(restored, now, body('c', 16, held(1, 0)), cert('c')).rest!
  t.equal(c2.perSecond, 15, 'so does the next')
  const again = checkIn(restored, now, body('a', 16, held(0, 0)), cert('a')).rest!
  t.equal(again.perSecond, 0, 'a, answered since the restore, holds what it was answered: its old share is still unknown')
  t.equal(checkIn(restored, now, body('b', 16, held(15, b.invalidBudget)), cert('b')).rest!.perSecond, 15, 'a second report of a held share counts nothing twice')
  now += LEASE_MS + 1
  const late = checkIn(restored, now, body('a', 16, demand(15)), cert('a')).rest!
  t.equal(late.perSecond, 15, 'a lease after the restore nothing unknown is left')
})

t.test('random churn: the shares in force never sum above the budgets', async (t) => {
  const random = seededRandom(6161)
  let c = new Controller(WITH_REST)
  const ledger = new Ledger()
  let now = T0
  let checks = 0
  const names = Array.from({ length: 12 }, (_, i) => `n${i}`)
  for (let step = 0; step < 4000; step++) {
    now += Math.floor(random() * 700)
    const nodeId = names[Math.floor(random() * names.length)]!
    const roll = random()
    if (roll < 0.04) {
      const out = checkIn(c, now, body(nodeId, 16, { leaving: true, ...(random() < 0.5 ? demand(1) : {}) }), cert(nodeId))
      ledger.answer(nodeId, out)
    } else if (roll < 0.06) {
      c.removeRevoked(now, (serial) => serial === nodeId) // its last share stays with the node
    } else if (roll < 0.08) {
      c.setDraining(now, nodeId, random() < 0.5, true)
    } else if (roll < 0.09) {
      c = new Controller(WITH_REST, { state: c.snapshot(), now }) // a restart; the ledger keeps what nodes hold
    } else if (roll < 0.5 && step % 7 === 0) {
      continue // silence: leases run out
    } else {
      const mine = ledger.held.get(nodeId)
      const holds = mine !== undefined && mine.untilMs > now ? { held: { per_second: mine.perSecond, invalid_budget: mine.invalidBudget } } : {}
      const want = random() < 0.2 ? 200 * random() : 10 * random()
      const out = checkIn(c, now, body(nodeId, 16, { rest_demand: { per_second: Math.round(want * 1000) / 1000, invalid_10m: Math.floor(random() * 3000), ...holds } }), cert(nodeId))
      ledger.answer(nodeId, out)
    }
    const sums = ledger.sums(now)
    checks += 1
    if (sums.perSecond > BUDGET || sums.invalid > INVALID) {
      t.fail(`step ${step}: shares in force ${JSON.stringify(sums)} above ${BUDGET}/s, ${INVALID}`)
      break
    }
  }
  t.equal(checks > 3000, true, `${checks} checks of the invariant`)
})

t.test('without a REST budget, answers carry none and the plan view shows null', async (t) => {
  const c = new Controller(SETTINGS)
  const out = checkIn(c, T0, body('a', 16, demand(5)), cert('a'))
  t.equal(out.rest, null)
  t.equal(c.plan(T0).rest, null)
  t.equal(c.plan(T0).nodes[0]!.rest, null)
})

t.test('settings: a bad REST budget fails at construction', async (t) => {
  t.throws(() => new Controller({ ...SETTINGS, rest: { ...REST, safety: 0 } }), /rest.safety/)
  t.throws(() => new Controller({ ...SETTINGS, rest: { ...REST, safety: 1.01 } }), /rest.safety/)
  t.throws(() => new Controller({ ...SETTINGS, rest: { ...REST, globalPerSecond: 0.5 } }), /rest.global_per_second/)
})
