// The fleet simulator's live-reshard phase at CI size: 6 real agents on the discord.js adapter against
// the gateway emulator, a real controller child process, 8 shards resharded live to 16 once the fleet
// has settled. No violation (no bucket breach, no overlap of one shard, no overlap of the two sets after
// the old one ran out, no test event lost), every guild covered by some session throughout, the switch
// comes, and the reshard spends one Identify per next-set shard: one IDENTIFY each at the gateway, and
// no grant but those (a start grant that aged past the adapter's maxGrantAgeMs on a slow machine before
// its IDENTIFY could leave is claimed afresh, and counted). About 40 s.
import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { CLI, runFleet } from './run-fleet.js'
import type { FleetSummary } from '../../bench/fleet/summary.js'
import { testDir } from '../support/test-dir.js'

t.test('6 nodes on the discord.js adapter, a live reshard 8 → 16: coverage, no violation, 16 grants', async (t) => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" (npm test does it first)`)
  const json = join(testDir(t), 'summary.json')
  const args = ['--gateway', 'discordjs', '--nodes', '6', '--shards', '8', '--max-concurrency', '8', '--duration', '3', '--lease', '8', '--seed', '11', '--live-reshard', '16']
  const churn = ['--joins', '0', '--leaves', '0', '--drains', '0', '--pauses', '0', '--restarts', '0', '--revocations', '0', '--partitions', '0']
  const { code, stdout, stderr } = await runFleet([...args, ...churn, '--json', json, '--no-progress'])
  t.equal(code, 0, `the simulator exits 0\n${stdout}\n${stderr.slice(-4000)}`)
  const summary = JSON.parse(readFileSync(json, 'utf8')) as FleetSummary
  t.same(Object.entries(summary.violationsByKind).filter(([, n]) => n > 0), [], 'no violation of any kind, the gateway emulator\'s included')
  const live = summary.liveReshard
  if (live === null) throw new Error('the summary has no live reshard')
  t.equal(live.coverageGap, null, 'some session covered every guild throughout the reshard')
  t.ok(live.switchAfterS !== null, `switched ${live.switchAfterS} s after POST /v1/reshard`)
  t.ok(live.oldSetGoneAfterS !== null, 'the old set ran out')
  t.equal(live.nextIdentifies, 16, 'one IDENTIFY per next-set shard at the gateway')
  t.equal(summary.shardsAtEnd, 16)
  const g = summary.gateway!
  const stale = summary.counts.stale_start_grants ?? 0
  t.equal(summary.grants.audited, g.total.identifies + stale, `every grant went into one IDENTIFY or aged and was claimed afresh (${summary.grants.audited} grants, ${g.total.identifies} IDENTIFYs, ${stale} aged)`)
  t.ok(live.nextGrants >= 16 && live.nextGrants <= 16 + stale, `next-set grants: 16, and at most one more per aged start grant (${live.nextGrants})`)
  t.equal(g.breaches.bucket ?? 0, 0, 'no bucket breach at the gateway')
  t.equal(g.breaches.overlap ?? 0, 0, 'never two sessions on one shard')
  t.equal(g.delivery.lost, 0, 'no test event lost')
  t.match(stdout, /live reshard \(8 → 16\)\s+switched/, 'the table shows the live reshard')
  t.comment(`live reshard 8 → 16 on 6 nodes: switched ${live.switchAfterS} s after the POST, old set gone after ${live.oldSetGoneAfterS} s, ${live.nextGrants} grants (${stale} start grants aged, all sets), coverage ${live.coverageGap ?? 'complete'}`)
})
