// Real agents against a real controller over mTLS: a live reshard from 8 to 16 shards (SPEC "Live
// resharding"). The next set identifies beside the current one, the controller switches once every
// next-set shard runs, the next-set sessions keep running through the switch and the old set stops.
// Throughout, some session covers every guild (the guild-coverage check); no bucket sees two grants
// closer than the interval; a node that joins during the reshard takes part in both sets.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { makePki, request, startTestController, bundle } from '../e2e/harness.js'
import { Recorder, nodeIdentities, recordingAgent, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const [idA, idB, idC] = await nodeIdentities(pki, ['node-a', 'node-b', 'node-c'])
const op = await bundle(pki, 'ops', 'operator')
const INTERVAL_MS = 5000
const LEASE_S = 6
const ctl = await startTestController(pki, root, { total_shards: 8, max_concurrency: 8, lease_seconds: LEASE_S, identify_interval_ms: INTERVAL_MS, daily_identify_limit: 1000 })
t.teardown(() => ctl.running.stop())
const rec = new Recorder()
const agents = [idA, idB, idC].map((id) => recordingAgent(rec, id, [urlOf(ctl.port)], { capacity: 16 }))
t.teardown(() => Promise.all(agents.map((a) => a.stop())))
const plan = async () => (await request(ctl.port, pki.ca, op, '/v1/plan')).json

t.test('8 → 16: coverage throughout, one switch within a lease, the next-set sessions kept, the buckets shared', async (t) => {
  await agents[0]!.start()
  await agents[1]!.start()
  await until('the 8 current shards run', () => rec.running('node-a', 8).length + rec.running('node-b', 8).length === 8, 30_000)
  const covered = performance.now()
  const grantsBefore = (await plan()).identify.used_24h

  const started = await request(ctl.port, pki.ca, op, '/v1/reshard', { body: { total_shards: 16 } })
  t.equal(started.status, 202, started.text)
  const postedAt = performance.now()
  const switchedAt = await switched(16)
  t.ok(switchedAt > 0, 'switched')
  await until('no session of 8 shards is left', () => ['node-a', 'node-b'].every((n) => rec.running(n, 8).length === 0), 20_000)
  t.same([rec.running('node-a', 16), rec.running('node-b', 16)], [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]])

  t.equal(rec.coverageGap(covered, 16), null, 'some session covered every guild at every moment')
  const nextStarts = rec.shardEvents.filter((e) => e.kind === 'start' && e.totalShards === 16)
  t.equal(nextStarts.length, 16, 'each next-set shard started once: none restarted at the switch')
  const lastNextStart = Math.max(...nextStarts.map((e) => e.at))
  t.ok(switchedAt - lastNextStart < LEASE_S * 1000 + 1000, `the switch came ${Math.round(switchedAt - lastNextStart)} ms after the last next-set shard started (within one lease, plus the polling)`)
  t.same(rec.shardEvents.filter((e) => e.kind === 'stop' && e.totalShards === 16), [], 'no next-set session stopped')
  const stops8 = rec.shardEvents.filter((e) => e.kind === 'stop' && e.totalShards === 8)
  t.equal(stops8.length, 8)
  t.ok(stops8.every((e) => e.reason === 'reshard' && e.at >= switchedAt - 1000), 'the old set stopped at the switch, reason reshard (no session handed on)')

  const grants = auditGrants()
  t.equal(grants.filter((g) => g.set === 'next').length, 16, 'one next-set grant per shard')
  t.ok(closestInBucket(grants) >= INTERVAL_MS, `grants of one bucket (either set) at least ${INTERVAL_MS} ms apart (closest ${closestInBucket(grants)} ms)`)
  const spent = (await plan()).identify.used_24h - grantsBefore
  t.equal(spent, 16, 'the reshard spent N Identify grants')
  t.comment(`reshard 8 → 16 on 2 nodes: ${Math.round(switchedAt - postedAt)} ms from POST /v1/reshard to the switch, ${spent} Identify grants`)
})

t.test('16 → 32 with a node joining half-way: both sets re-planned, next-set shards handed over safely, the switch', async (t) => {
  const started = await request(ctl.port, pki.ca, op, '/v1/reshard', { body: { total_shards: 32 } })
  t.equal(started.status, 202, started.text)
  await until('some shard of 32 runs', () => rec.running('node-a', 32).length + rec.running('node-b', 32).length > 0, 30_000)
  await agents[2]!.start() // joins during the reshard: both sets are re-planned over three nodes
  const switchedAt = await switched(32)
  t.ok(switchedAt > 0, 'switched')
  await until('every node runs its part of the 32 and nothing else', () => ['node-a', 'node-b', 'node-c'].every((n) => rec.running(n, 16).length === 0) && ['node-a', 'node-b', 'node-c'].reduce((sum, n) => sum + rec.running(n, 32).length, 0) === 32, 30_000)
  t.ok(rec.running('node-c', 32).length > 0, 'the joiner runs part of the new set')
  t.same(rec.overlaps32(), [], 'no shard of 32 ran on two nodes at once')
  t.ok(closestInBucket(auditGrants()) >= INTERVAL_MS, 'bucket spacing held')
})

t.test('an abort: the next set stops (reason reshard), the current set runs on untouched', async (t) => {
  // 3 nodes of capacity 16 cannot hold 64 shards: this reshard would never switch
  const before = rec.shardEvents.length
  const started = await request(ctl.port, pki.ca, op, '/v1/reshard', { body: { total_shards: 64 } })
  t.equal(started.status, 202, started.text)
  await until('some shard of 64 runs', () => ['node-a', 'node-b', 'node-c'].some((n) => rec.running(n, 64).length > 0), 30_000)
  t.match((await plan()).reshard, { phase: 'identifying', total_shards: 64 })
  const aborted = await request(ctl.port, pki.ca, op, '/v1/reshard', { method: 'DELETE' })
  t.equal(aborted.status, 200, aborted.text)
  await until('no shard of 64 runs', () => ['node-a', 'node-b', 'node-c'].every((n) => rec.running(n, 64).length === 0), 20_000)
  const since = rec.shardEvents.slice(before)
  t.same(since.filter((e) => e.totalShards !== 64), [], 'nothing of the current set stopped or started')
  const stops = since.filter((e) => e.kind === 'stop')
  t.ok(stops.length > 0, 'the next set\'s shards were stopped')
  t.ok(stops.every((e) => e.reason === 'reshard'), 'the next set stopped with reason reshard (no session handed on)')
  t.equal((await plan()).total_shards, 32, 'the bot stays on 32 shards')
  t.equal((await plan()).reshard, null)
})

/** Polls the plan until the controller runs `total` shards; the moment it saw it. */
async function switched(total: number): Promise<number> {
  for (let i = 0; i < 900; i++) {
    if ((await plan()).total_shards === total) return performance.now()
    await new Promise((r) => setTimeout(r, 100))
  }
  return 0
}

function auditGrants(): { bucket: number; time: string; set?: string }[] {
  return readFileSync(join(root, 'audit.log'), 'utf8').trim().split('\n').map((line) => JSON.parse(line)).filter((e) => e.event === 'identify_granted')
}

function closestInBucket(grants: readonly { bucket: number; time: string }[]): number {
  const byBucket = new Map<number, number[]>()
  for (const g of grants) byBucket.set(g.bucket, [...(byBucket.get(g.bucket) ?? []), Date.parse(g.time)])
  let closest = Infinity
  for (const times of byBucket.values()) for (let i = 1; i < times.length; i++) closest = Math.min(closest, times[i]! - times[i - 1]!)
  return closest
}
