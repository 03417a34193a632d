// A rolling reboot at CI size (issue 60, SPEC "Leaving on purpose"): 2 nodes, each in its own process
// running the discord.js adapter against the gateway emulator, a real controller child process; once
// every shard serves, each node in turn gets SIGTERM (its agent leaves), stays down 4 s (longer than a
// check-in interval, so that its shards move), and a new process of the same node starts; the next waits
// until the fleet has converged again. Asserted: the behaviour, never the speed — every moved shard
// RESUMEs (0 IDENTIFY after the cold start), every leave answered, every test event delivered exactly
// once, no overlap on the timeline or at the gateway, no violation. The downtimes are printed as a
// comment. About 25-30 s. The pure pairing of stops with the next READY / RESUMED is tested first.
import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { CLI, runFleet } from './run-fleet.js'
import { interruptions, moveStats } from '../../bench/fleet/rolling-figures.js'
import type { RollingSummary } from '../../bench/fleet/rolling-figures.js'
import type { FleetRecord } from '../../bench/fleet/protocol.js'
import { testDir } from '../support/test-dir.js'

t.test("an interruption is a running session's stop until the shard's next READY or RESUMED", async (t) => {
  const stop = (t: number, node: string, shard: number, reason: string): FleetRecord => ({ t, node, kind: 'stop', shard, totalShards: 4, reason })
  const start = (t: number, node: string, shard: number): FleetRecord => ({ t, node, kind: 'start', shard, totalShards: 4, generation: 1 })
  const serving = (t: number, node: string, shard: number, mode: 'identify' | 'resume'): FleetRecord => ({ t, node, kind: 'running', shard, totalShards: 4, mode })
  const records = [
    serving(5, 'a', 0, 'identify'), // a cold start: no interruption
    stop(100, 'a', 0, 'leave'),
    start(150, 'b', 0),
    serving(400, 'b', 0, 'resume'),
    stop(90, 'a', 1, 'leave'), // out of order on arrival: sorted by time
    start(200, 'b', 1),
    stop(210, 'b', 1, 'start_failed'), // a refused RESUME: the agent starts it again as an IDENTIFY
    start(220, 'b', 1),
    serving(900, 'b', 1, 'identify'),
    serving(950, 'b', 1, 'resume'), // a reconnect that resumed: no stop before it
    stop(20, 'c', 2, 'plan'), // before `since`
    serving(60, 'd', 2, 'resume'),
  ]
  const list = interruptions(records, 50)
  t.same(list.map((i) => [i.shard, i.from, i.to, i.reason, i.downtimeMs, i.mode]), [
    [0, 'a', 'b', 'leave', 300, 'resume'],
    [1, 'a', 'b', 'leave', 810, 'identify'],
  ])
  t.same(moveStats(list), { count: 2, resumed: 1, identified: 1, medianMs: 300, maxMs: 810 })
  t.same(moveStats([]), { count: 0, resumed: 0, identified: 0, medianMs: null, maxMs: null })
})

t.test('a rolling reboot of 2 nodes by SIGTERM: every moved shard RESUMEs, every event exactly once, no overlap', async (t) => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" (npm test does it first)`)
  const json = join(testDir(t), 'rolling.json')
  const args = ['--rolling-reboot', '--nodes', '2', '--shards', '4', '--max-concurrency', '4', '--lease', '9', '--reboot-s', '4']
  const { code, stdout, stderr } = await runFleet([...args, '--json', json, '--no-progress'])
  t.equal(code, 0, `the rolling reboot exits 0\n${stdout}\n${stderr.slice(-4000)}`)
  const s = JSON.parse(readFileSync(json, 'utf8')) as RollingSummary
  t.comment(stdout.split('\n').filter((l) => /moves|away|rebalance|wall time/.test(l)).join('\n'))
  t.same(Object.entries(s.violationsByKind).filter(([, n]) => n > 0), [], 'no violation of any kind (overlaps, grants, the gateway emulator\'s, convergence)')
  t.equal(s.signal, 'SIGTERM')
  t.equal(s.reboots.length, 2, 'every node was rebooted')
  for (const r of s.reboots) {
    t.equal(r.exit, 0, `${r.node}'s process exited 0 after its leave`)
    t.not(r.convergedAfterMs, null, `the fleet converged again after ${r.node}'s return`)
  }
  t.same(s.leaves, { answered: 2, failed: 0 }, 'every leave was answered')
  // (a shard the returning node got back before another node took it resumes on the same node: no move)
  t.ok(s.moves.count > 0, `shards moved (${s.moves.count}; ${s.sameNode.count} back on their own node)`)
  t.equal(s.moves.identified + s.sameNode.identified, 0, 'no interrupted shard was identified')
  t.equal(s.moves.resumed, s.moves.count, 'every moved shard RESUMEd')
  t.equal(s.rollingIdentifies, 0, '0 IDENTIFY at the gateway after the cold start')
  const g = s.gateway
  t.equal((g.breaches.overlap ?? 0) + (g.breaches.guild_overlap ?? 0) + (g.breaches.bucket ?? 0), 0, 'never two sessions on one shard, no bucket breach')
  t.ok(g.delivery.expected > 100, `${g.delivery.expected} test events produced`)
  t.equal(g.delivery.lost, 0, 'no test event lost')
  t.equal(g.delivery.duplicated, 0, 'no test event delivered twice')
  t.equal(g.delivery.unknown, 0, 'nothing delivered that the emulator did not send')
  t.equal(g.delivery.undeliverable, 0, 'no session ended without a successor')
})
