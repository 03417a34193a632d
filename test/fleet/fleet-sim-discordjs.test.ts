// The fleet simulator with --gateway discordjs at CI size: 8 real agents running their shards with the
// discord.js adapter against the gateway emulator, a real controller child process, a join, a leave, a
// drain, a SIGSTOP pause longer than a lease (to the controller and the gateway, a node gone dead: its
// sessions miss their heartbeats and its shards are identified elsewhere after the lease) and a kill -9
// of the controller. No violation: neither the simulator's own checks nor the emulator's (no bucket
// breach, no two sessions on a shard or a guild, no test event lost or delivered twice), and the moves
// of the drain and the join go by RESUME. About 30-40 s.
import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { CLI, runFleet } from './run-fleet.js'
import type { FleetSummary } from '../../bench/fleet/summary.js'
import { testDir } from '../support/test-dir.js'

t.test('8 nodes on the discord.js adapter, 16 shards in 4 buckets, 15 s of churn: no violation', async (t) => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" (npm test does it first)`)
  const json = join(testDir(t), 'summary.json')
  const args = ['--gateway', 'discordjs', '--nodes', '8', '--shards', '16', '--max-concurrency', '4', '--duration', '15', '--lease', '8', '--seed', '7']
  const churn = ['--joins', '1', '--leaves', '1', '--drains', '1', '--pauses', '1', '--restarts', '1', '--revocations', '0', '--partitions', '0']
  const { code, stdout, stderr } = await runFleet([...args, ...churn, '--json', json, '--no-progress'])
  t.equal(code, 0, `the simulator exits 0\n${stdout}\n${stderr.slice(-4000)}`)
  const summary = JSON.parse(readFileSync(json, 'utf8')) as FleetSummary
  t.same(Object.entries(summary.violationsByKind).filter(([, n]) => n > 0), [], 'no violation of any kind, the gateway emulator\'s included')
  t.match(summary.churn, { join: 1, leave: 1, drain: 2, pause: 1, restart: 1 }, 'every churn event was carried out')
  const g = summary.gateway
  if (g === null) throw new Error('the summary has no gateway figures')
  t.comment(`emulator breaches: ${JSON.stringify(g.breaches)} (a heartbeat miss is the paused node's)`)
  t.equal(g.breaches.bucket ?? 0, 0, 'no bucket breach')
  t.equal((g.breaches.overlap ?? 0) + (g.breaches.guild_overlap ?? 0), 0, 'never two sessions on one shard or guild')
  t.equal(g.breaches.session_start_limit ?? 0, 0, 'within the session start limit')
  t.ok(g.total.sessionsStarted >= 16, `every shard was identified (${g.total.sessionsStarted} sessions started)`)
  t.ok(g.total.identifies <= summary.grants.audited, `every IDENTIFY was paid for by a grant of the controller (${g.total.identifies} IDENTIFYs, ${summary.grants.audited} grants)`)
  const churnPhase = g.phases.find((p) => p.phase === 'churn')
  t.ok(churnPhase !== undefined && churnPhase.resumes > 0, `the drain and the join moved shards by RESUME (${churnPhase?.resumes} during the churn)`)
  t.ok(g.delivery.expected > 200, `${g.delivery.expected} test events produced`)
  t.equal(g.delivery.lost, 0, 'no test event lost')
  t.equal(g.delivery.duplicated, 0, 'no test event delivered twice')
  t.equal(g.delivery.unknown, 0, 'nothing delivered that the emulator did not send')
  t.not(summary.convergedAfterS, null, 'the fleet converged')
  t.match(stdout, /RESUME \d+ \(refused \d+\)/, 'the table shows the gateway rows')
})
