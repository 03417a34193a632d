// The fleet simulator's checks on hand-made timelines: each finds what it must, and nothing else.
import t from 'tap'
import { checkGrants, readAuditGrants, type AuditGrant } from '../../bench/fleet/check-grants.js'
import { checkOverlaps, type OverlapInput } from '../../bench/fleet/check-overlaps.js'
import { partitionFigures, reshardFigures } from '../../bench/fleet/event-figures.js'
import { commonGuild, shareGuilds } from '../../src/core/snowflake.js'
import type { FleetRecord } from '../../bench/fleet/protocol.js'
import type { ReceivedGrant } from '../../bench/fleet/ledger.js'

const start = (t: number, node: string, shard: number, totalShards = 16): FleetRecord => ({ t, node, kind: 'start', shard, totalShards, generation: 1 })
const stop = (t: number, node: string, shard: number, totalShards = 16): FleetRecord => ({ t, node, kind: 'stop', shard, totalShards, reason: 'plan' })
const input = (records: FleetRecord[], extra: Partial<OverlapInput> = {}): OverlapInput => ({ records, freezes: [], revocations: [], endT: 100_000, wakeGraceMs: 500, leaseMs: 8000, ...extra })
const kinds = (vs: readonly { kind: string }[]) => vs.map((v) => v.kind)

t.test('a shard on two nodes at once is an overlap; a handoff that stops first is not', async (t) => {
  const clean = checkOverlaps(input([start(0, 'a', 1), stop(1000, 'a', 1), start(1000.5, 'b', 1), stop(2000, 'b', 1)]))
  t.same(clean.violations, [])
  const twice = checkOverlaps(input([start(0, 'a', 1), start(900, 'b', 1), stop(1000, 'a', 1), stop(2000, 'b', 1)]))
  t.same(kinds(twice.violations), ['overlap'])
  t.match(twice.violations[0]!.detail, /shard 1: b started while a ran it \(100\.0 ms/)
  // Records arrive out of order across workers: the check sorts them on the one timeline.
  const shuffled = checkOverlaps(input([stop(2000, 'b', 1), start(900, 'b', 1), stop(1000, 'a', 1), start(0, 'a', 1)]))
  t.same(kinds(shuffled.violations), ['overlap'])
  const open = checkOverlaps(input([start(0, 'a', 1), start(5000, 'b', 1)]))
  t.same(kinds(open.violations), ['overlap'], 'a shard never stopped runs to the end of the run')
})

t.test('guild math: shard a of Sa and b of Sb share a guild iff a ≡ b (mod gcd)', async (t) => {
  const cases: [number, number, number, number, number | null][] = [
    [5, 16, 5, 16, 5],
    [5, 16, 6, 16, null],
    [0, 16, 16, 32, 16],
    [1, 16, 16, 32, null],
    [1, 16, 17, 32, 17],
    [3, 6, 1, 4, 9], // gcd 2: 9 = 3 + 6 = 1 + 2·4
    [2, 6, 1, 4, null],
    [5, 64, 5, 32, 5],
    [37, 64, 5, 32, 37],
  ]
  for (const [a, sa, b, sb, guild] of cases) {
    t.equal(commonGuild(a, sa, b, sb), guild, `${a}/${sa} and ${b}/${sb}`)
    t.equal(shareGuilds(a, sa, b, sb), guild !== null)
    if (guild !== null) t.ok(guild % sa === a && guild % sb === b, 'the witness is served by both')
  }
})

t.test('guild coverage: sessions of different shard counts are judged by the guilds they serve', async (t) => {
  const run = (records: FleetRecord[], extra: Partial<OverlapInput> = {}) => checkOverlaps(input(records, extra))
  const table: [string, FleetRecord[], string[]][] = [
    ['same count, same shard, two nodes', [start(0, 'a', 3, 16), start(500, 'b', 3, 16), stop(1000, 'a', 3)], ['overlap']],
    ['0/16 and 16/32 serve guild 16<<22', [start(0, 'a', 0, 16), start(500, 'b', 16, 32), stop(1000, 'a', 0)], ['guild_overlap']],
    ['1/16 and 16/32 serve no common guild', [start(0, 'a', 1, 16), start(500, 'b', 16, 32), stop(1000, 'a', 1)], []],
    ['one node, two counts, together', [start(0, 'a', 5, 64), start(500, 'a', 5, 32), stop(1000, 'a', 5, 64)], ['guild_overlap']],
    ['one node, one count, two shards', [start(0, 'a', 5, 64), start(500, 'a', 6, 64)], []],
    ['a stop before the other start', [start(0, 'a', 0, 16), stop(1000, 'a', 0), start(1000.5, 'b', 16, 32)], []],
    ['one node: the old count stopped before the new started', [start(0, 'a', 5, 64), stop(499, 'a', 5, 64), start(500, 'a', 5, 32)], []],
    ['37/64 then 5/32 overlapping', [start(0, 'a', 37, 64), start(10, 'b', 5, 32), stop(20, 'b', 5, 32), stop(30, 'a', 37, 64)], ['guild_overlap']],
  ]
  for (const [name, records, expected] of table) t.same(kinds(run(records).violations), expected, name)
  const found = run([start(0, 'fleet-0001', 0, 16), start(188, 'fleet-0002', 16, 32), stop(1000, 'fleet-0001', 0), stop(2000, 'fleet-0002', 16, 32)])
  t.equal(found.violations[0]!.detail, 'guild 16<<22: fleet-0001 shard 0/16 and fleet-0002 shard 16/32 together 812.0 ms', 'the detail names both sessions and a guild')
  // A frozen old owner runs nothing; a revoked one's overlap is a violation too (SPEC "Leases"), as for one count.
  const freeze = { nodes: ['a'], from: 1000, to: 11_000 }
  const frozen = run([start(0, 'a', 0, 16), start(10_000, 'b', 16, 32), stop(11_003, 'a', 0)], { freezes: [freeze] })
  t.same(frozen.violations, [], 'frozen: the old session does not run while its process is frozen')
  const late = run([start(0, 'a', 0, 16), start(10_000, 'b', 16, 32), stop(12_000, 'a', 0)], { freezes: [freeze] })
  t.same(kinds(late.violations).sort(), ['guild_overlap', 'late_stop_after_wake'])
  const revoked = run([start(0, 'a', 0, 16), start(900, 'b', 16, 32), stop(1000, 'a', 0)], { revocations: [{ node: 'a', requestedAt: 400, at: 500 }] })
  t.same(kinds(revoked.violations), ['guild_overlap'])
  t.match(revoked.revokedOverlaps, [{ shard: 16, totalShards: 32, revoked: 'a', next: 'b' }])
  const selfRevoked = run([start(0, 'a', 0, 16), start(900, 'a', 16, 32), stop(1000, 'a', 0)], { revocations: [{ node: 'a', requestedAt: 400, at: 500 }] })
  t.ok(kinds(selfRevoked.violations).includes('guild_overlap'), 'a revoked node overlapping itself is no handoff: still a violation')
})

t.test('a slow stop runs until it ends (an aborted one until the abort); partition and reshard figures', async (t) => {
  const slowStop = (t: number, calledAt: number, node: string, shard: number, aborted = false): FleetRecord => ({ t, node, kind: 'stop', shard, totalShards: 16, reason: 'lease_expiring', calledAt, aborted })
  const handedOn = [start(0, 'a', 1), slowStop(6000, 5000, 'a', 1), start(9000, 'b', 1)]
  t.same(checkOverlaps(input(handedOn)).violations, [], 'the new owner started after the slow stop ended')
  const tooSoon = [start(0, 'a', 1), slowStop(6000, 5000, 'a', 1, true), start(5500, 'b', 1)]
  t.same(kinds(checkOverlaps(input(tooSoon)).violations), ['overlap'], 'started while the (aborted) stop still ran')
  const [p] = partitionFigures(handedOn, [{ node: 'a', from: 1000, to: 15_000 }], 20_000)
  t.same(p, { node: 'a', cutMs: 14_000, heldShards: 1, lastStopMs: 5000, slowestStopMs: 1000, abortedStops: 0, handedOn: 1, minHandoffGapMs: 3000 })
  const reshard = [start(0, 'a', 5, 64), start(0, 'b', 37, 64), stop(3000, 'a', 5, 64), stop(3500, 'b', 37, 64), start(9000, 'a', 5, 32)]
  const note = { signal: 'SIGTERM' as const, stoppedAt: 1000, listeningAt: 2000, fromShards: 64, toShards: 32, planTotalShards: 32, generationBefore: 4, generationAfter: 5, expected: ['a', 'b'], allOnNewPlanMs: 900 }
  t.match(reshardFigures(reshard, [note], 20_000), [{ oldSessions: 2, lastOldStopMs: 1500, firstNewStartMs: 7000, downMs: 1000 }])
  t.same(checkOverlaps(input(reshard)).violations, [], '5/32 after both old sessions that share its guilds ended')
})

t.test('a frozen node runs nothing while frozen and must stop what it lost on waking', async (t) => {
  const freeze = { nodes: ['a'], from: 1000, to: 11_000 }
  const records = [start(0, 'a', 1), start(10_000, 'b', 1), stop(11_003, 'a', 1), stop(20_000, 'b', 1)]
  const ok = checkOverlaps(input(records, { freezes: [freeze] }))
  t.same(ok.violations, [], 'stopped 3 ms after the wake')
  t.same(ok.pauses, [{ frozenMs: 10_000, heldShards: 1, wakeToStopMs: 3 }])
  const late = checkOverlaps(input([start(0, 'a', 1), start(10_000, 'b', 1), stop(12_000, 'a', 1), stop(20_000, 'b', 1)], { freezes: [freeze] }))
  t.same(kinds(late.violations).sort(), ['late_stop_after_wake', 'overlap'], 'a late stop is flagged, and the shard counts as running from the wake')
  const unfrozen = checkOverlaps(input(records))
  t.same(kinds(unfrozen.violations), ['overlap'], 'without the freeze the same records overlap')
})

t.test('a revoked node: overlaps after the revocation are violations (listed apart too); it must stop and start nothing', async (t) => {
  const revocations = [{ node: 'a', requestedAt: 400, at: 500 }]
  const after = checkOverlaps(input([start(0, 'a', 1), start(900, 'b', 1), stop(1000, 'a', 1)], { revocations }))
  t.same(kinds(after.violations), ['overlap'], 'a new owner may not start before the revoked node stopped')
  t.equal(after.revokedOverlaps.length, 1)
  t.same(after.revocations, [{ node: 'a', heldShards: 1, lastStopMs: 600 }])
  const before = checkOverlaps(input([start(0, 'b', 1), start(100, 'a', 1), stop(1000, 'b', 1), stop(1000, 'a', 1)], { revocations }))
  t.same(kinds(before.violations), ['overlap'], 'an overlap that began before the revocation is a violation')
  const kept = checkOverlaps(input([start(0, 'a', 1), stop(20_000, 'a', 1)], { revocations }))
  t.same(kinds(kept.violations), ['revoked_kept_running'])
  const restarted = checkOverlaps(input([start(5000, 'a', 2), stop(6000, 'a', 2)], { revocations }))
  t.same(kinds(restarted.violations), ['revoked_started'])
})

const grant = (time: number, shard: number, node = 'a', generation = 1): AuditGrant => ({ time, node, shard, bucket: shard % 16, generation })
const received = (g: AuditGrant): ReceivedGrant => ({ t: g.time + 3, node: g.node, shard: g.shard, generation: g.generation })

t.test('grants: spacing per bucket on the audited times, every received grant audited, the daily budget', async (t) => {
  const spaced = [grant(0, 0), grant(5100, 16), grant(5000, 1), grant(10_199, 32)]
  const ok = checkGrants({ audited: spaced, received: spaced.map(received), intervalMs: 5100, maxConcurrency: 16, dailyLimit: 10 })
  t.same(ok.violations, [])
  t.equal(ok.minAuditedGapMs, 5099, 'within the tolerance')
  const close = checkGrants({ audited: [grant(0, 0), grant(5049, 16)], received: [], intervalMs: 5100, maxConcurrency: 16, dailyLimit: 10 })
  t.same(kinds(close.violations), ['grant_spacing'])
  const unaudited = checkGrants({ audited: [grant(0, 0)], received: [received(grant(0, 0)), received(grant(7000, 16))], intervalMs: 5100, maxConcurrency: 16, dailyLimit: 10 })
  t.same(kinds(unaudited.violations), ['unaudited_grant'])
  const many = Array.from({ length: 5 }, (_, i) => grant(i * 6000, i * 16))
  const over = checkGrants({ audited: many, received: many.map(received), intervalMs: 5100, maxConcurrency: 16, dailyLimit: 4 })
  t.same(kinds(over.violations), ['daily_budget', 'daily_budget'], 'audited and received both above the budget')
  const spread = Array.from({ length: 5 }, (_, i) => grant(i * 43_200_000, i * 16))
  t.same(checkGrants({ audited: spread, received: [], intervalMs: 5100, maxConcurrency: 16, dailyLimit: 3 }).violations, [], 'the budget is a rolling 24 hours')
})

t.test('readAuditGrants takes identify_granted lines only, and skips a torn one', async (t) => {
  const line = (event: string, extra: object) => JSON.stringify({ level: 30, time: '2026-01-01T00:00:05.100Z', seq: 1, prev: '0', event, ...extra })
  const text = [
    line('identify_granted', { node_id: 'n1', shard_id: 17, bucket: 1, generation: 4 }),
    line('plan_generation_changed', { from: 1, to: 2 }),
    '{"level":30,"time":"2026-01-01T00:00:06.000Z","event":"identify_granted","node_id":"n2","sha',
  ].join('\n')
  t.same(readAuditGrants(text), [{ time: Date.parse('2026-01-01T00:00:05.100Z'), node: 'n1', shard: 17, bucket: 1, generation: 4 }])
})
