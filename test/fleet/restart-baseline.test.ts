// What the fleet simulator judges a restart or a take-over against: the plan read before the kill, or,
// when the new process restored a newer generation (the controller moved on between the read and the
// kill), the ranges the nodes had accepted under that generation. A re-plan on restore stays a fault.
import t from 'tap'
import { appendFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { OperatorPlan } from '../../bench/fleet/operator-client.js'
import type { FleetRecord } from '../../bench/fleet/protocol.js'
import { auditSince, auditSize, baselineOf, matchesBaseline, movedFrom, restoredFrom } from '../../bench/fleet/restart-baseline.js'
import { testDir } from '../support/test-dir.js'

const plan = (generation: number, ranges: [string, number, number][]): OperatorPlan =>
  ({ generation, total_shards: 8, nodes: ranges.map(([node_id, range_start, range_count]) => ({ node_id, range_start, range_count })) }) as unknown as OperatorPlan

const accepted = (t: number, node: string, generation: number, assigned: number[]): FleetRecord =>
  ({ t, node, kind: 'event', event: { type: 'plan_accepted', generation, assigned, changed: true, controller: 'x' } }) as FleetRecord

t.test('the new process tells the generation it restored, and whether it re-planned first', async (t) => {
  const line = (o: object) => JSON.stringify({ level: 30, ...o })
  const text = [line({ event: 'controller_start', generation: null }), line({ event: 'tls_rejected' }), line({ event: 'leader_elected', generation: 9 }), '{"event":"plan_gen'].join('\n')
  t.same(restoredFrom(text, 'leader_elected'), { generation: 9, replannedOnRestore: false })
  t.same(restoredFrom(text, 'controller_start'), { generation: null, replannedOnRestore: false }, 'a start without a generation (HA) is not what it restored')
  const replanned = [line({ event: 'plan_generation_changed', from: 9, to: 10 }), line({ event: 'controller_start', generation: 10 })].join('\n')
  t.same(restoredFrom(replanned, 'controller_start'), { generation: 10, replannedOnRestore: true })
  t.same(restoredFrom('', 'leader_elected'), { generation: null, replannedOnRestore: false })
})

t.test('only what was appended after the mark is read', async (t) => {
  const path = join(testDir(t), 'audit.log')
  t.equal(auditSize(path), 0, 'a log not there yet has size 0')
  t.equal(auditSince(path, 0), '')
  writeFileSync(path, '{"event":"leader_elected","generation":3}\n')
  const mark = auditSize(path)
  appendFileSync(path, '{"event":"leader_elected","generation":4}\n')
  t.same(restoredFrom(auditSince(path, mark), 'leader_elected').generation, 4)
  t.equal(auditSince(path, auditSize(path)), '')
})

t.test('the plan read before the kill is the baseline unless a newer generation was restored', async (t) => {
  const before = plan(8, [['a', 0, 4], ['b', 4, 4]])
  const same = baselineOf(before, 8, [], 1000)
  t.same(same, { generation: 8, ranges: new Map([['a', [0, 1, 2, 3]], ['b', [4, 5, 6, 7]]]), rebased: false })
  t.same(baselineOf(before, null, [], 1000).generation, 8, 'nothing restored known: the plan read')
  t.equal(movedFrom(same, plan(8, [['a', 0, 4], ['b', 4, 4]])), 0)
  t.equal(movedFrom(same, plan(9, [['a', 0, 5], ['b', 5, 3]])), 1, 'shard 4 went from b to a')
  t.ok(matchesBaseline(same, 'a', { generation: 8, assigned: [0, 1, 2, 3] }))
  t.notOk(matchesBaseline(same, 'a', { generation: 8, assigned: [0, 1, 2] }), 'the same generation with another range')
  t.notOk(matchesBaseline(same, 'c', { generation: 8, assigned: [] }), 'a node the plan did not have')
})

t.test('rebased: the ranges nodes accepted under the restored generation before the kill', async (t) => {
  const before = plan(8, [['a', 0, 3], ['b', 3, 3], ['gone', 6, 2]])
  const records = [
    accepted(900, 'a', 8, [0, 1, 2]),
    accepted(950, 'a', 9, [0, 1, 2, 3]),
    accepted(990, 'b', 9, [4, 5, 6, 7]),
    accepted(1200, 'b', 9, [9]), // after the kill: not the baseline
    accepted(980, 'c', 10, [5]), // another generation
  ]
  const base = baselineOf(before, 9, records, 1000)
  t.same(base, { generation: 9, ranges: new Map([['a', [0, 1, 2, 3]], ['b', [4, 5, 6, 7]]]), rebased: true })
  t.equal(movedFrom(base, plan(9, [['a', 0, 4], ['b', 4, 4]])), 0, 'the restored plan moved nothing')
  t.equal(movedFrom(base, plan(9, [['a', 0, 3], ['b', 3, 5]])), 1, 'a restored plan that differs is still caught')
  t.ok(matchesBaseline(base, 'a', { generation: 9, assigned: [0, 1, 2, 3] }))
  t.ok(matchesBaseline(base, 'x', { generation: 9, assigned: [1] }), 'a node that had not accepted it is not judged')
  t.notOk(matchesBaseline(base, 'a', { generation: 8, assigned: [0, 1, 2] }), 'an older plan after the restart is')
})
