// A reshard by restart, end to end: real agents and a real controller stopped and started again with
// another total_shards (or max_concurrency). Every session started under the old values must stop
// before its node reports the new generation (which lifts the controller's reshard barrier), and no
// guild may be served by two running sessions at any moment, each judged by its own shard count.
import t, { type Test } from 'tap'
import { join } from 'node:path'
import { makePki } from '../e2e/harness.js'
import { Recorder, controllerIn, nodeIdentities, recordingAgent, until, urlOf } from './support.js'
import { testDir } from '../support/test-dir.js'

const root = testDir(t)
const pki = await makePki(root)
const [idA, idB] = await nodeIdentities(pki, ['node-a', 'node-b'])
const base = { lease_seconds: 6, identify_interval_ms: 5000 }

/** Two agents of capacity 16 on `before`, then a restart of the controller (same state) on `after`. */
async function reshardRun(t: Test, dir: string, before: Record<string, number>, after: Record<string, number>) {
  const first = await controllerIn(pki, join(root, dir), { ...base, ...before })
  const port = first.port
  const rec = new Recorder()
  const a = recordingAgent(rec, idA, [urlOf(port)], { capacity: 16 })
  const b = recordingAgent(rec, idB, [urlOf(port)], { capacity: 16 })
  t.teardown(() => Promise.all([a.stop(), b.stop()]))
  await a.start()
  await b.start()
  const half = before.total_shards! / 2
  await until('both nodes run their half', () => rec.running('node-a').length === half && rec.running('node-b').length === half, 30_000)
  const generationBefore = a.status().reportedGeneration!
  await first.running.stop()
  const second = await controllerIn(pki, join(root, dir), { ...base, ...after, listen: { host: '127.0.0.1', port } })
  t.teardown(() => second.running.stop())
  const total = after.total_shards!
  const range = (from: number) => Array.from({ length: total / 2 }, (_, i) => from + i).join()
  const restartedAt = performance.now()
  // Each node runs its new range, every session of it started after the restart under the new values.
  const settled = (node: string, agent: typeof a, from: number) => {
    if (agent.status().running.join() !== range(from)) return false
    const fresh = rec.shardEvents.filter((e) => e.node === node && e.kind === 'start' && e.at > restartedAt && e.totalShards === total && e.maxConcurrency === after.max_concurrency)
    return new Set(fresh.map((e) => e.shard)).size === total / 2
  }
  await until('both nodes run their half of the new set', () => settled('node-a', a, 0) && settled('node-b', b, total / 2), 60_000)
  return { rec, a, b, generationBefore, restartedAt }
}

t.test('total_shards 16 → 32: the old sessions stop before the new generation is reported; no guild twice', async (t) => {
  const { rec, a, b, restartedAt } = await reshardRun(t, 'c16-32', { total_shards: 16, max_concurrency: 16 }, { total_shards: 32, max_concurrency: 16 })
  t.same(rec.guildOverlaps(), [], 'no guild was served by two running sessions at any moment')
  for (const [node, agent] of [['node-a', a], ['node-b', b]] as const) {
    const running = rec.shardEvents.filter((e) => e.node === node && e.kind === 'start' && e.at > restartedAt)
    t.ok(running.every((e) => e.totalShards === 32), `${node} started every new session with 32 shards`)
    const oldStops = rec.shardEvents.filter((e) => e.node === node && e.kind === 'stop' && e.totalShards === 16)
    t.equal(oldStops.length, 8, `${node} stopped all 8 of its sessions of 16 shards`)
    // node-a keeps shards 0..7 by number, but they mean other guilds now: a reshard stop, not a plan one.
    if (node === 'node-a') t.ok(oldStops.every((e) => e.reason === 'reshard'), 'node-a stopped them for the reshard')
    const reports = rec.events(node, 'plan_accepted').filter((e) => e.at > restartedAt)
    t.ok(reports.length > 0, `${node} accepted the new plan`)
    const lastOldStop = Math.max(...oldStops.map((e) => e.at))
    const firstNewStart = Math.min(...running.map((e) => e.at))
    t.ok(lastOldStop < firstNewStart, `${node}: every old session stopped before any new one started`)
    t.same(agent.status().running, Array.from({ length: 16 }, (_, i) => i + (node === 'node-a' ? 0 : 16)), `${node} runs its new range`)
  }
})

t.test('max_concurrency 16 → 8 alone: every session restarts under the new value', async (t) => {
  const { rec, restartedAt } = await reshardRun(t, 'mc16-8', { total_shards: 16, max_concurrency: 16 }, { total_shards: 16, max_concurrency: 8 })
  t.same(rec.guildOverlaps(), [], 'no guild was served by two running sessions at any moment')
  const after = rec.shardEvents.filter((e) => e.kind === 'start' && e.at > restartedAt)
  t.equal(after.length, 16, 'all 16 sessions started again')
  t.ok(after.every((e) => e.maxConcurrency === 8), 'each with max_concurrency 8')
  const stops = rec.shardEvents.filter((e) => e.kind === 'stop' && e.maxConcurrency === 16)
  t.equal(stops.length, 16, 'every session of max_concurrency 16 was stopped')
  t.ok(stops.every((e) => e.reason === 'reshard'), 'for the reshard')
})
